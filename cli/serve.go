package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	"renga.dev/renga/server"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/logbuf"
	"renga.dev/renga/server/pgembed"
)

// newLogger returns the server's logger on standard error, and what writes the lines it still
// holds (server/logbuf: lines below Warn wait up to cfg.LogFlushInterval to be written together).
func newLogger(cfg server.Config, f *Factory) (*slog.Logger, func() error) {
	w := logbuf.New(f.Stderr, cfg.LogFlushInterval)
	if cfg.Development() {
		return slog.New(logbuf.NewHandler(slog.NewTextHandler(w, nil), w)), w.Flush
	}
	return slog.New(logbuf.NewJSONHandler(w, nil)), w.Flush
}

type serveOptions struct {
	f *Factory

	Dev bool
}

func newCmdServe(f *Factory, runF func(*serveOptions) error) *cobra.Command {
	opts := &serveOptions{f: f}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the deployment server",
		Long: `Run the deployment server, configured by RENGA_* environment variables (see docs/configuration.md).

With --dev and no RENGA_DATABASE_URL, it starts a private PostgreSQL from this machine's binaries
in $RENGA_DATA_DIR (default .renga) and migrates it. With --dev it prints export lines for
RENGA_URL, RENGA_OPERATOR_TOKEN (a full-scope dev token, recorded in $RENGA_DATA_DIR/dev-token and
reused by the next start until a day before it expires, then revoked and replaced) and
RENGA_DATABASE_URL.`,
		Args: positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return serveRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Dev, "dev", false, "development deployment with an embedded database and a printed dev token")
	return cmd
}

func serveRun(ctx context.Context, opts *serveOptions) error {
	f := opts.f
	mode := server.ModeServe
	if opts.Dev {
		mode = server.ModeDev
	}
	cfg, err := server.LoadConfig(f.Getenv, mode)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("configuration refused:\n%w", err)}
	}
	cfg.Version = Version
	server.SetGCPercent(os.Getenv) // the runtime reads the process's own environment, whatever f says
	log, flush := newLogger(cfg, f)
	defer func() { _ = flush() }() // after everything else deferred here has logged
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Bind first, so a taken port fails before anything starts.
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("RENGA_LISTEN: %w", err)
	}
	defer func() { _ = ln.Close() }()
	if opts.Dev && cfg.DatabaseURL == "" {
		dir := filepath.Join(cfg.DataDir, "postgres")
		log.Info("starting the embedded PostgreSQL", "dir", dir)
		cluster, err := pgembed.Start(ctx, dir, pgembed.Options{})
		if err != nil {
			return err
		}
		defer func() {
			if err := cluster.Stop(); err != nil {
				log.Error("stopping the embedded PostgreSQL", "error", err)
			}
		}()
		cfg.DatabaseURL = cluster.URL("postgres")
	}
	pool, err := db.Open(ctx, cfg.DatabaseURL, cfg.DatabaseMaxConns)
	if err != nil {
		return err
	}
	defer pool.Close()
	if opts.Dev {
		if err := db.Migrate(ctx, pool, log); err != nil {
			return err
		}
	} else if st, err := db.Status(ctx, pool); err != nil {
		return err
	} else if st.Pending > 0 {
		return fmt.Errorf("the database schema is %d migration(s) behind: run `renga migrate` first", st.Pending)
	}
	if opts.Dev {
		if err := printDevToken(ctx, f, pool, cfg, ln.Addr()); err != nil {
			return err
		}
	}
	return server.Run(ctx, cfg, pool, log, ln)
}

// redactURL hides a password in a URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

type migrateOptions struct {
	f *Factory

	// Action is up or status.
	Action string
}

func newCmdMigrate(f *Factory, runF func(*migrateOptions) error) *cobra.Command {
	opts := &migrateOptions{f: f}
	return &cobra.Command{
		Use:       "migrate [up|status]",
		Short:     "Apply database migrations (release command)",
		Args:      positional("[up|status]"),
		ValidArgs: []string{"up", "status"},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Action = "up"
			if len(args) == 1 {
				opts.Action = args[0]
			}
			if opts.Action != "up" && opts.Action != "status" {
				return usageError("migrate takes up or status, not %q", opts.Action)
			}
			if runF != nil {
				return runF(opts)
			}
			return migrateRun(cmd.Context(), opts)
		},
	}
}

func migrateRun(ctx context.Context, opts *migrateOptions) error {
	f := opts.f
	pool, err := f.Pool(ctx)
	if err != nil {
		return err
	}
	if opts.Action == "up" {
		log := slog.New(slog.NewTextHandler(f.Stderr, nil))
		if err := db.Migrate(ctx, pool, log); err != nil {
			return err
		}
	}
	st, err := db.Status(ctx, pool)
	if err != nil {
		return err
	}
	if f.JSON() {
		return writeJSON(f, st)
	}
	fmt.Fprintf(f.Stdout, "schema version %d, %d pending\n", st.Version, st.Pending)
	return nil
}

type versionOptions struct {
	f *Factory
}

func newCmdVersion(f *Factory, runF func(*versionOptions) error) *cobra.Command {
	opts := &versionOptions{f: f}
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return versionRun(opts)
		},
	}
}

func versionRun(opts *versionOptions) error {
	if opts.f.JSON() {
		return writeJSON(opts.f, map[string]string{"version": Version})
	}
	_, err := fmt.Fprintln(opts.f.Stdout, Version)
	return err
}
