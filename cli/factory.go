package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/term"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/server"
	"renga.dev/renga/server/db"
)

// Factory builds what commands need, lazily, from flags and the environment. Tests replace
// Getenv, the streams and what is a terminal.
type Factory struct {
	Stdout, Stderr io.Writer
	Stdin          io.Reader
	Getenv         func(string) string
	// IsTerminal says stdout is a terminal (tables rather than tab-separated rows).
	IsTerminal bool
	// StdinIsTerminal says a person can answer on stdin (destructive commands ask them).
	StdinIsTerminal bool

	output      string
	url         string
	token       string
	local       bool
	databaseURL string

	client  *client.ClientWithResponses
	closers []func()
}

// NewFactory uses the process's environment and standard streams.
func NewFactory() *Factory {
	return &Factory{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin, Getenv: os.Getenv,
		IsTerminal: term.IsTerminal(int(os.Stdout.Fd())), StdinIsTerminal: term.IsTerminal(int(os.Stdin.Fd()))}
}

// Close releases what the factory opened.
func (f *Factory) Close() {
	for i := len(f.closers) - 1; i >= 0; i-- {
		f.closers[i]()
	}
	f.closers = nil
}

// DatabaseURL is --database-url, else RENGA_DATABASE_URL.
func (f *Factory) DatabaseURL() string {
	if f.databaseURL != "" {
		return f.databaseURL
	}
	return f.Getenv("RENGA_DATABASE_URL")
}

func (f *Factory) remoteURL() string {
	if f.url != "" {
		return f.url
	}
	return f.Getenv("RENGA_URL")
}

// Local reports whether client commands run as release commands.
func (f *Factory) Local() bool {
	return f.local || (f.remoteURL() == "" && f.DatabaseURL() != "")
}

// JSON reports whether output is the API's own JSON.
func (f *Factory) JSON() bool { return f.output == "json" }

// Pool connects to the deployment's database (release commands).
func (f *Factory) Pool(ctx context.Context) (*pgxpool.Pool, error) {
	url := f.DatabaseURL()
	if url == "" {
		return nil, usageError("this command runs on the server host: set RENGA_DATABASE_URL or --database-url")
	}
	pool, err := db.Open(ctx, url, 4)
	if err != nil {
		return nil, err
	}
	f.closers = append(f.closers, pool.Close)
	return pool, nil
}

// Client is the generated client for the operator API: remote, or in-process as the local
// operator.
func (f *Factory) Client(ctx context.Context) (*client.ClientWithResponses, error) {
	if f.client != nil {
		return f.client, nil
	}
	var base string
	var opts []client.ClientOption
	var err error
	if f.Local() {
		base, opts, err = f.localClientOptions(ctx)
	} else {
		base, opts, err = f.remoteClientOptions()
	}
	if err != nil {
		return nil, err
	}
	c, err := client.NewClientWithResponses(base, opts...)
	if err != nil {
		return nil, err
	}
	f.client = c
	return c, nil
}

// localClientOptions sends requests through the server's handler in this process, as the local
// operator, configured like the server on this host.
func (f *Factory) localClientOptions(ctx context.Context) (string, []client.ClientOption, error) {
	cfg, err := server.LoadConfig(f.Getenv, server.ModeRelease)
	if err != nil {
		return "", nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("configuration refused:\n%w", err)}
	}
	pool, err := f.Pool(ctx)
	if err != nil {
		return "", nil, err
	}
	cfg.Version = Version
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := server.New(cfg, pool, log)
	if err != nil {
		return "", nil, err
	}
	transport := &server.LocalTransport{Handler: s.Handler(), InvocationID: server.NewInvocationID()}
	return "http://local", []client.ClientOption{client.WithHTTPClient(&http.Client{Transport: transport})}, nil
}

// StreamingClient is Client for requests whose body or response is an archive of any size:
// remotely, its requests have no overall timeout (the command's context still stops them).
func (f *Factory) StreamingClient(ctx context.Context) (*client.ClientWithResponses, error) {
	if f.Local() {
		return f.Client(ctx)
	}
	base, opts, err := f.remoteClientOptions()
	if err != nil {
		return nil, err
	}
	opts = append(opts, client.WithHTTPClient(&http.Client{}))
	return client.NewClientWithResponses(base, opts...)
}

// remoteClientOptions sends requests to RENGA_URL with the operator token.
func (f *Factory) remoteClientOptions() (string, []client.ClientOption, error) {
	base := f.remoteURL()
	if base == "" {
		return "", nil, usageError("set RENGA_URL and RENGA_OPERATOR_TOKEN (or --url), or run on the server host with RENGA_DATABASE_URL (or --local)")
	}
	token := f.token
	if token == "" {
		token = f.Getenv("RENGA_OPERATOR_TOKEN")
	}
	if token == "" {
		return "", nil, usageError("set RENGA_OPERATOR_TOKEN to an operator token")
	}
	return base, []client.ClientOption{
		client.WithHTTPClient(&http.Client{Timeout: 60 * time.Second}),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			r.Header.Set("User-Agent", "renga-cli/"+Version)
			return nil
		}),
	}, nil
}

// OwnerClient is the generated client for the organization (owner) API, authenticated with the
// personal API key in RENGA_API_KEY. Owner commands always go over HTTP: they are not release
// commands (the owner API is the organization's, not the operator's).
func (f *Factory) OwnerClient(needKey bool) (*client.ClientWithResponses, error) {
	base := f.remoteURL()
	if base == "" {
		return nil, usageError("set RENGA_URL to the deployment's URL")
	}
	key := f.Getenv("RENGA_API_KEY")
	if needKey && key == "" {
		return nil, usageError("set RENGA_API_KEY to your personal API key (renga owner accept prints it)")
	}
	return client.NewClientWithResponses(base, client.WithHTTPClient(&http.Client{Timeout: 60 * time.Second}),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if needKey {
				r.Header.Set("Authorization", "Bearer "+key)
			}
			r.Header.Set("User-Agent", "renga-cli/"+Version)
			return nil
		}))
}
