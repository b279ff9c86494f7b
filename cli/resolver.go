package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"renga.dev/renga/resolver"
)

// The reference resolver (RFD 23, DESIGN §7.4): `renga resolver serve`.

func newCmdResolver(f *Factory) *cobra.Command {
	cmd := group("resolver", "Run a resolver that tells agents where their home deployment is")
	cmd.AddCommand(newCmdResolverServe(f, nil))
	return cmd
}

type resolverServeOptions struct {
	f *Factory

	Listen string
	Map    string
	Rate   float64
	Burst  int
	TLS    struct{ Cert, Key string }
}

// newCmdResolverServe is `renga resolver serve`.
func newCmdResolverServe(f *Factory, runF func(*resolverServeOptions) error) *cobra.Command {
	opts := &resolverServeOptions{f: f}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Answer agents' home requests from a static map",
		Long: `Answer GET /api/v1/agent/home?deployment=ID with {"home": URL} from --map, a YAML file with
"deployments:", a mapping of deployment identifiers to home URLs; an unknown or empty identifier
is 404. SIGHUP reloads the map (a bad map keeps the old one, and the log says why). Requests are
rate-limited per source address.`,
		Args: positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Map == "" {
				return usageError("--map is required")
			}
			if (opts.TLS.Cert == "") != (opts.TLS.Key == "") {
				return usageError("--tls-cert and --tls-key go together")
			}
			if opts.Rate < 0 || opts.Burst < 1 {
				return usageError("--rate must be 0 or more and --burst at least 1")
			}
			if runF != nil {
				return runF(opts)
			}
			return resolverServeRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Listen, "listen", "127.0.0.1:8081", "address to listen on")
	cmd.Flags().StringVar(&opts.Map, "map", "", "the map file (YAML)")
	cmd.Flags().Float64Var(&opts.Rate, "rate", 10, "requests per second per source address (0: unlimited)")
	cmd.Flags().IntVar(&opts.Burst, "burst", 50, "burst per source address")
	cmd.Flags().StringVar(&opts.TLS.Cert, "tls-cert", "", "serve HTTPS with this certificate file")
	cmd.Flags().StringVar(&opts.TLS.Key, "tls-key", "", "and this key file")
	return cmd
}

func resolverServeRun(ctx context.Context, opts *resolverServeOptions) error {
	f := opts.f
	log := slog.New(slog.NewJSONHandler(f.Stderr, nil))
	m, err := resolver.LoadMap(opts.Map)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("--map: %w", err)}
	}
	r := resolver.New(m, opts.Rate, opts.Burst, log)
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := r.Reload(opts.Map); err != nil {
					log.Error("map not reloaded: keeping the previous one", "map", opts.Map, "error", err.Error())
					continue
				}
				log.Info("map reloaded", "map", opts.Map, "deployments", len(r.Map()))
			}
		}
	}()
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("resolver listening", "listen", ln.Addr().String(), "map", opts.Map, "deployments", len(m))
	if opts.TLS.Cert != "" {
		err = srv.ServeTLS(ln, opts.TLS.Cert, opts.TLS.Key)
	} else {
		err = srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
