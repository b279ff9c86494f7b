// Package servertest gives tests a real PostgreSQL and a real HTTP server: a fresh database per
// test, cloned from a migrated template, on RENGA_TEST_DATABASE_URL or on a private cluster.
package servertest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"renga.dev/renga/migrations"
	"renga.dev/renga/server"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/logbuf"
	"renga.dev/renga/server/pgembed"
	"renga.dev/renga/server/secretbox"
)

var (
	adminURL     string // a URL to the cluster's maintenance database
	templateName string
)

// Main runs a package's tests with a database cluster ready. Use it from TestMain.
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main without the exit: it returns the exit code, so that a caller can clean up first.
func Run(m *testing.M) int {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "servertest:", err)
		return 1
	}
	return code
}

func run(m *testing.M) (int, error) {
	ctx := context.Background()
	adminURL = os.Getenv("RENGA_TEST_DATABASE_URL")
	if adminURL == "" {
		dir, err := os.MkdirTemp("", "renga-test-pg-")
		if err != nil {
			return 0, err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		c, err := pgembed.Start(ctx, dir, pgembed.Options{Fast: true})
		if err != nil {
			return 0, fmt.Errorf("start a private PostgreSQL (set RENGA_TEST_DATABASE_URL to use another): %w", err)
		}
		defer func() { _ = c.Stop() }()
		adminURL = c.URL("postgres")
	}
	if err := ensureTemplate(ctx); err != nil {
		return 0, err
	}
	return m.Run(), nil
}

// ensureTemplate creates, once per schema, a migrated template database. Test processes of
// several packages race for it; an advisory lock lets one build it.
func ensureTemplate(ctx context.Context) error {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := migrations.FS.ReadFile(path)
		h.Write([]byte(path))
		h.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	templateName = "renga_tmpl_" + hex.EncodeToString(h.Sum(nil))[:12]
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connect to the test cluster: %w", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(7226351)`); err != nil {
		return err
	}
	defer func() { _, _ = conn.Exec(ctx, `SELECT pg_advisory_unlock(7226351)`) }()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, templateName).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	building := templateName + "_build"
	_, _ = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+building+` WITH (FORCE)`)
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+building); err != nil {
		return err
	}
	pool, err := db.Open(ctx, withDatabase(adminURL, building), 2)
	if err != nil {
		return err
	}
	err = db.Migrate(ctx, pool, slog.New(slog.DiscardHandler))
	pool.Close()
	if err != nil {
		return fmt.Errorf("migrate the template: %w", err)
	}
	if _, err := conn.Exec(ctx, `ALTER DATABASE `+building+` RENAME TO `+templateName); err != nil {
		return err
	}
	_, err = conn.Exec(ctx, `ALTER DATABASE `+templateName+` IS_TEMPLATE true`)
	return err
}

func withDatabase(u, name string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		panic(err)
	}
	parsed.Path = "/" + name
	return parsed.String()
}

// NewDatabase creates a fresh migrated database for t and drops it when t ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	if templateName == "" {
		t.Fatal("servertest: call servertest.Main from TestMain")
	}
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "renga_t_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	for attempt := 0; ; attempt++ {
		_, err = conn.Exec(ctx, `CREATE DATABASE `+name+` TEMPLATE `+templateName+` STRATEGY FILE_COPY`)
		// Another process cloning the template at the same instant is "being accessed": retry.
		if err == nil || attempt == 20 || db.SQLState(err) != "55006" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			return
		}
		defer func() { _ = conn.Close(ctx) }()
		_, _ = conn.Exec(ctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
	})
	return withDatabase(adminURL, name)
}

// Env is a running server on its own database.
type Env struct {
	URL    string // base URL of the HTTP server
	Pool   *pgxpool.Pool
	Server *server.Server
	Config server.Config
	Logs   *LogFile // everything the server logged
	DBURL  string

	mu      sync.Mutex
	secrets []string
}

// Track adds a secret (a token, a key, an invitation secret) to those that must never appear
// in the audit log, Activity, queued jobs or the logs: when the test ends, Start's cleanup scans
// them all and fails the test on any.
func (e *Env) Track(secrets ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.secrets = append(e.secrets, secrets...)
}

// scanForSecrets is the suite-wide secret scan of every test that uses Start.
func (e *Env) scanForSecrets(t testing.TB) {
	leaked, err := e.LeakedSecrets()
	if err != nil {
		t.Errorf("secret scan: %v", err)
	}
	for _, s := range leaked {
		t.Errorf("secret scan: a secret (%s...) appears in the logs or the database", s[:min(len(s), 16)])
	}
}

// LeakedSecrets returns the tracked secrets found in the server's logs or in the tables that
// must never hold one (the audit log, Activity, queued jobs, idempotency records, credentials).
func (e *Env) LeakedSecrets() ([]string, error) {
	e.mu.Lock()
	secrets := append([]string(nil), e.secrets...)
	e.mu.Unlock()
	if len(secrets) == 0 {
		return nil, nil
	}
	ctx := context.Background()
	logs, err := e.Logs.Contents()
	if err != nil {
		return nil, fmt.Errorf("the server's log: %w", err)
	}
	var dump strings.Builder
	dump.WriteString(logs)
	for _, table := range []string{"audit_events", "organization_activity", "river_job", "idempotency_keys", "operator_tokens",
		"user_api_keys", "invitations", "intake_keys", "installations", "identity_providers", "identity_provider_revisions", "signin_flows", "deployment_sessions", "local_recoveries",
		"transfers", "transfer_download_authorizations", "pending_memberships"} {
		query := `SELECT row_to_json(t)::text FROM ` + table + ` t`
		if table == "idempotency_keys" {
			// Stored responses are bytea: read them as the text they are.
			query = `SELECT row_to_json(t)::text || convert_from(t.body, 'UTF8') FROM idempotency_keys t`
		}
		rows, err := e.Pool.Query(ctx, query)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", table, err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				rows.Close()
				return nil, err
			}
			dump.WriteString(s)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", table, err)
		}
	}
	all := dump.String()
	var leaked []string
	for _, s := range secrets {
		if strings.Contains(all, s) {
			leaked = append(leaked, s)
		}
	}
	return leaked, nil
}

// OwnURL as the public URL (WithOwnPublicURL) becomes the test server's own address, so the home
// request answers a URL the test (and an agent) can reach.
const OwnURL = "http://servertest.own"

// WithOwnPublicURL makes the server's public URL its own address.
func WithOwnPublicURL() Option { return func(c *server.Config) { c.PublicURL = OwnURL } }

// Option adjusts the server's configuration.
type Option func(*server.Config)

// Start runs a development-mode server on a fresh database over real HTTP.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	return StartTraced(t, nil, opts...)
}

// StartTraced is Start with tracer on every connection of the server's pool (nil: none), to see
// the statements and round trips a request makes.
func StartTraced(t testing.TB, tracer pgx.QueryTracer, opts ...Option) *Env {
	t.Helper()
	dbURL := NewDatabase(t)
	poolConfig, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	poolConfig.MaxConns = 10
	poolConfig.ConnConfig.Tracer = tracer
	pool, err := db.OpenConfig(context.Background(), poolConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	cfg := server.Config{
		Environment:                 server.EnvDevelopment,
		PublicURL:                   "http://renga.test",
		DeletionGracePeriod:         720 * time.Hour,
		IdempotencyRetention:        24 * time.Hour,
		RateLimitAuthenticated:      0,
		RateLimitAuthenticatedBurst: 1,
		RateLimitAnonymous:          0,
		RateLimitAnonymousBurst:     1,
		Version:                     "test",
		DatabaseURL:                 dbURL,
		PolicyDefaults:              domain.BuiltinDefaults,
		DataDir:                     t.TempDir(),
		MailFrom:                    "renga@renga.test",
		PurgeInterval:               time.Hour,
		Secrets:                     NewSecretBox(t),
		IntakeStatements:            2,
		LogFlushInterval:            server.DefaultLogFlushInterval,
		// As renga serve's defaults: every request has a deadline and a slot.
		RequestTimeout: 30 * time.Second,
		MaxInFlight:    256,
	}
	for _, o := range opts {
		o(&cfg)
	}
	// The listener exists before the server, so that the server can be its own public URL.
	ts := httptest.NewUnstartedServer(nil)
	if cfg.PublicURL == OwnURL {
		cfg.PublicURL = "http://" + ts.Listener.Addr().String()
	}
	logs := NewLogFile(t)
	// As renga serve: lines gathered and written together (server/logbuf); reading the file
	// writes what waits first.
	lw := logbuf.New(logs, cfg.LogFlushInterval)
	logs.flush = lw.Flush
	log := slog.New(logbuf.NewJSONHandler(lw, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := server.New(cfg, pool, log)
	if err != nil {
		ts.Close()
		t.Fatal(err)
	}
	ts.Config.Handler = s.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	env := &Env{URL: ts.URL, Pool: pool, Server: s, Config: cfg, Logs: logs, DBURL: dbURL}
	// Registered after the pool's cleanup, so it runs before the pool closes.
	t.Cleanup(func() { env.scanForSecrets(t) })
	return env
}

// StartJobs starts the server's job workers (mail, purge, retention) until t ends.
func (e *Env) StartJobs(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := e.Server.StartJobs(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		_ = e.Server.StopJobs(stopCtx)
		cancel()
	})
}

// Token mints an operator token with scopes and returns its secret.
func (e *Env) Token(t testing.TB, scopes ...string) string {
	t.Helper()
	name := "test-" + strings.Join(scopes, "+")
	if len(name) > 100 {
		name = name[:100]
	}
	_, secret, err := domain.CreateToken(context.Background(), e.Pool, domain.NewToken{Name: name, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	e.Track(secret)
	return secret
}

// AllScopes is every operator scope.
func AllScopes() []string { return append([]string(nil), domain.Scopes...) }

// LogFile is where a test server logs: a file, as the server's standard error is in
// production. The server pays what a log line costs there (a write to a file descriptor), and
// no more: a benchmark's millions of lines kept in memory would be heap that the collector never
// has to scan, and would make it run less often than it does in production.
type LogFile struct {
	f     *os.File
	flush func() error // writes the lines the server's logger holds (set by Start)
}

// NewLogFile creates an empty log file in a directory t removes.
func NewLogFile(t testing.TB) *LogFile {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(t.TempDir(), "server.log"), os.O_CREATE|os.O_EXCL|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return &LogFile{f: f}
}

// Write appends p whole (one write to a file opened for appending: lines written at once do
// not interleave).
func (l *LogFile) Write(p []byte) (int, error) { return l.f.Write(p) }

// Contents returns everything written so far, what the server's logger still holds included.
func (l *LogFile) Contents() (string, error) {
	if l.flush != nil {
		if err := l.flush(); err != nil {
			return "", err
		}
	}
	b, err := os.ReadFile(l.f.Name())
	return string(b), err
}

// String returns everything written so far; it panics if the file cannot be read (a test that
// looks for a line, or for a secret's absence, must not be given an empty log instead).
func (l *LogFile) String() string {
	s, err := l.Contents()
	if err != nil {
		panic(fmt.Sprintf("the server's log: %v", err))
	}
	return s
}

// SyncBuffer keeps everything written to it, for concurrent writers (a process's output, an
// agent's log). It grows in chunks, never copying what it holds.
type SyncBuffer struct {
	mu     sync.Mutex
	chunks [][]byte
}

const syncBufferChunk = 1 << 20

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		if len(s.chunks) == 0 || len(s.chunks[len(s.chunks)-1]) == cap(s.chunks[len(s.chunks)-1]) {
			s.chunks = append(s.chunks, make([]byte, 0, syncBufferChunk))
		}
		last := &s.chunks[len(s.chunks)-1]
		k := min(len(p), cap(*last)-len(*last))
		*last = append(*last, p[:k]...)
		p = p[k:]
	}
	return n, nil
}

// String returns everything written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, c := range s.chunks {
		b.Write(c)
	}
	return b.String()
}

// ForgetSecrets stops tracking secrets (for a test that plants a leak on purpose).
func (e *Env) ForgetSecrets() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.secrets = nil
}

// NewSecretBox is a box under a fresh random key (a test deployment's RENGA_SECRET_KEY).
func NewSecretBox(t testing.TB) *secretbox.Box {
	k, err := secretbox.ParseKey(secretbox.NewKey())
	if err != nil {
		t.Fatal(err)
	}
	b, err := secretbox.New(k)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
