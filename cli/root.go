// Package cli is the `renga` command: the server (serve, migrate), release-only commands, and
// client commands for every API operation. Client commands always use the generated client:
// remotely over HTTP, or as release commands through an in-process transport into the same
// server handler, as the local operator.
package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/server"
	"renga.dev/renga/server/db"
)

// Exit codes (DESIGN §10).
const (
	ExitOK           = 0
	ExitFailure      = 1
	ExitUsage        = 2
	ExitAuth         = 4
	ExitPrecondition = 5
	ExitConflict     = 6
)

// Version is set at build time.
var Version = "dev"

// ExitError carries the process exit code of a failed command.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// Factory builds what commands need, lazily, from flags and the environment. Tests replace
// Getenv, Stdout and Stderr.
type Factory struct {
	Stdout, Stderr io.Writer
	Stdin          io.Reader
	Getenv         func(string) string
	IsTerminal     bool

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
		IsTerminal: term.IsTerminal(int(os.Stdout.Fd()))}
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

// Client is the generated client: remote, or in-process as the local operator.
func (f *Factory) Client(ctx context.Context) (*client.ClientWithResponses, error) {
	if f.client != nil {
		return f.client, nil
	}
	var opts []client.ClientOption
	base := f.remoteURL()
	if f.Local() {
		cfg, err := server.LoadConfig(f.Getenv, server.ModeRelease)
		if err != nil {
			return nil, &ExitError{Code: ExitUsage, Err: fmt.Errorf("configuration refused:\n%w", err)}
		}
		pool, err := f.Pool(ctx)
		if err != nil {
			return nil, err
		}
		cfg.Version = Version
		log := slog.New(slog.NewTextHandler(io.Discard, nil))
		s, err := server.New(cfg, pool, log)
		if err != nil {
			return nil, err
		}
		transport := &server.LocalTransport{Handler: s.Handler(), InvocationID: server.NewInvocationID()}
		opts = append(opts, client.WithHTTPClient(&http.Client{Transport: transport}))
		base = "http://local"
	} else {
		if base == "" {
			return nil, usageError("set RENGA_URL and RENGA_OPERATOR_TOKEN (or --url), or run on the server host with RENGA_DATABASE_URL (or --local)")
		}
		token := f.token
		if token == "" {
			token = f.Getenv("RENGA_OPERATOR_TOKEN")
		}
		if token == "" {
			return nil, usageError("set RENGA_OPERATOR_TOKEN to an operator token")
		}
		opts = append(opts,
			client.WithHTTPClient(&http.Client{Timeout: 60 * time.Second}),
			client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
				r.Header.Set("Authorization", "Bearer "+token)
				r.Header.Set("User-Agent", "renga-cli/"+Version)
				return nil
			}))
	}
	c, err := client.NewClientWithResponses(base, opts...)
	if err != nil {
		return nil, err
	}
	f.client = c
	return c, nil
}

// JSON reports whether output is the API's own JSON.
func (f *Factory) JSON() bool { return f.output == "json" }

func usageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// NewRootCommand builds the `renga` command tree.
func NewRootCommand(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:           "renga",
		Short:         "Run and operate a Renga deployment",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch f.output {
			case "":
				f.output = "table"
				if !f.IsTerminal {
					f.output = "tsv"
				}
			case "table", "json":
				if f.output == "table" && !f.IsTerminal {
					f.output = "tsv"
				}
			default:
				return usageError("--output must be table or json")
			}
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.StringVarP(&f.output, "output", "o", "", "output format: table or json (default: table on a terminal, tab-separated rows otherwise)")
	pf.StringVar(&f.url, "url", "", "deployment URL (default $RENGA_URL)")
	pf.BoolVar(&f.local, "local", false, "run as a release command on the server host (uses $RENGA_DATABASE_URL)")
	pf.StringVar(&f.databaseURL, "database-url", "", "PostgreSQL URL for release commands (default $RENGA_DATABASE_URL)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &ExitError{Code: ExitUsage, Err: err} })
	root.AddCommand(newServeCommand(f), newMigrateCommand(f), newVersionCommand(f), newOperatorTokenCommand(f),
		newDeploymentCommand(f), newTokenCommand(f), newOrgCommand(f), newAuditCommand(f), newInvitationCommand(f),
		newPolicyCommand(f), newUsageCommand(f), newOwnerCommand(f))
	return root
}

// Execute runs the command line with the process's environment and returns the exit code.
func Execute(args []string) int {
	f := NewFactory()
	defer f.Close()
	return Run(f, args)
}

// Run runs the command line with f and returns the exit code; errors go to f.Stderr.
func Run(f *Factory, args []string) int { return RunContext(context.Background(), f, args) }

// RunContext is Run with a context whose cancellation stops the command (as a signal does).
func RunContext(ctx context.Context, f *Factory, args []string) int {
	root := NewRootCommand(f)
	root.SetArgs(args)
	root.SetOut(f.Stdout)
	root.SetErr(f.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(f.Stderr, "error:", err)
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	// cobra's own argument errors are usage errors.
	if strings.HasPrefix(err.Error(), "unknown command") || strings.Contains(err.Error(), "arg(s)") ||
		strings.HasPrefix(err.Error(), "required flag") {
		return ExitUsage
	}
	return ExitFailure
}

// apiResponse is what every generated *Response offers.
type apiResponse interface{ StatusCode() int }

// problemBody is the part of a problem the CLI reports.
type problemBody struct {
	Title         string `json:"title"`
	Detail        string `json:"detail"`
	Error         string `json:"error"`
	RequestID     string `json:"request_id"`
	RequiredScope string `json:"required_scope"`
	Errors        []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

// check turns a transport error or an error response into an ExitError with the documented
// exit code.
func check(resp apiResponse, err error) error {
	if err != nil {
		return fmt.Errorf("request failed: %w", err)
	}
	status := resp.StatusCode()
	// Every generated response has the raw body in its Body field.
	body := reflect.ValueOf(resp).Elem().FieldByName("Body").Bytes()
	if status < 400 {
		return nil
	}
	var p problemBody
	_ = json.Unmarshal(body, &p)
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	for _, fe := range p.Errors {
		msg += fmt.Sprintf("\n  %s: %s", fe.Field, fe.Message)
	}
	msg += fmt.Sprintf(" (%d %s", status, p.Error)
	if p.RequestID != "" {
		msg += ", request " + p.RequestID
	}
	msg += ")"
	code := ExitFailure
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		code = ExitAuth
	case http.StatusPreconditionFailed, http.StatusPreconditionRequired:
		code = ExitPrecondition
	case http.StatusConflict:
		code = ExitConflict
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		code = ExitUsage
	}
	return &ExitError{Code: code, Err: errors.New(msg)}
}

// printJSON writes the API's JSON body, indented.
func (f *Factory) printJSON(body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, body, "", "  "); err != nil {
		_, err = f.Stdout.Write(body)
		return err
	}
	buf.WriteByte('\n')
	_, err := f.Stdout.Write(buf.Bytes())
	return err
}

// printTable writes rows under headers: aligned on a terminal, tab-separated otherwise.
func (f *Factory) printTable(headers []string, rows [][]string) error {
	if f.output == "tsv" {
		for _, r := range rows {
			if _, err := fmt.Fprintln(f.Stdout, strings.Join(r, "\t")); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(f.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(headers, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// print renders a successful response: its JSON, or the table the command makes of it.
func (f *Factory) print(body []byte, headers []string, rows func() [][]string) error {
	if f.JSON() {
		return f.printJSON(body)
	}
	return f.printTable(headers, rows())
}

// idempotencyKey returns the key to send: the flag's, or a new one. It reports it on stderr so
// that rerunning the command with --idempotency-key recovers the same operation.
func (f *Factory) idempotencyKey(flag string) string {
	key := flag
	if key == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		key = hex.EncodeToString(b[:])
	}
	f.reportKey(key)
	return key
}

// reportKey says on stderr which Idempotency-Key a mutating command sends.
func (f *Factory) reportKey(key string) {
	fmt.Fprintf(f.Stderr, "Idempotency-Key: %s (rerun with --idempotency-key %s to recover this operation; a secret shown once is not shown again)\n", key, key)
}

func relTime(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < 0:
		return "in " + roundDuration(-d)
	case d < time.Minute:
		return "just now"
	default:
		return roundDuration(d) + " ago"
	}
}

func roundDuration(d time.Duration) string {
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// timeCell is a relative time on a terminal and RFC 3339 when piped.
func (f *Factory) timeCell(t time.Time) string {
	if f.output == "table" {
		return relTime(t)
	}
	return t.UTC().Format(time.RFC3339)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// group is a command that only holds subcommands; an unknown subcommand is a usage error.
func group(use, short string, aliases ...string) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Aliases: aliases,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return usageError("%s needs a subcommand", cmd.CommandPath())
		},
	}
}
