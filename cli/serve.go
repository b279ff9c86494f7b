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
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"renga.dev/renga/server"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pgembed"
)

func newLogger(cfg server.Config, f *Factory) *slog.Logger {
	if cfg.Development() {
		return slog.New(slog.NewTextHandler(f.Stderr, nil))
	}
	return slog.New(slog.NewJSONHandler(f.Stderr, nil))
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
		Long: `Run the deployment server, configured by RENGA_* environment variables (see the README).

With --dev and no RENGA_DATABASE_URL, it starts a private PostgreSQL from this machine's binaries
in $RENGA_DATA_DIR (default .renga), migrates it, and prints a full-scope operator token.`,
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
	log := newLogger(cfg, f)
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

// printDevToken mints a full-scope token for this development run and prints it on stdout
// (never through the logger: logs carry no secrets).
func printDevToken(ctx context.Context, f *Factory, pool *pgxpool.Pool, cfg server.Config, addr net.Addr) error {
	expires := time.Now().Add(7 * 24 * time.Hour)
	var t domain.Token
	var secret string
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		var err error
		t, secret, err = domain.CreateToken(ctx, tx, domain.NewToken{Name: "dev", Scopes: domain.Scopes, ExpiresAt: &expires})
		if err != nil {
			return err
		}
		return domain.RecordAudit(ctx, tx, domain.ReleaseAudit(invocationID, "createOperatorToken", t.ID, domain.OutcomeSucceeded,
			[]string{"name", "scopes", "expires_at"}))
	})
	if err != nil {
		return err
	}
	base := cfg.PublicURL
	if tcp, ok := addr.(*net.TCPAddr); ok && cfg.Listen != "" && tcp.Port != 0 {
		base = fmt.Sprintf("http://127.0.0.1:%d", tcp.Port)
	}
	fmt.Fprintf(f.Stdout, `
Renga is running in development mode at %s (database: %s).
A full-scope operator token (%s, expires %s) for this run; paste these lines in another shell:

    export RENGA_URL=%s
    export RENGA_OPERATOR_TOKEN=%s

Then try: %[7]s org create acme --display-name "Acme Corporation" && %[7]s audit list
`, base, redactURL(cfg.DatabaseURL), t.ID, expires.UTC().Format(time.RFC3339), base, secret, os.Args[0])
	return nil
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
