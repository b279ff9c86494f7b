package agent_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"renga.dev/renga/agent"
	"renga.dev/renga/server/servertest"
)

// recorded is one request a test server received.
type recorded struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
	At                     time.Time
}

// recorder keeps every request a test server receives.
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
}

func (r *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, recorded{Method: req.Method, Path: req.URL.Path, RawQuery: req.URL.RawQuery, Header: req.Header.Clone(), Body: body, At: time.Now()})
		r.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, req)
	})
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

func (r *recorder) count(method, path string) int {
	n := 0
	for _, q := range r.all() {
		if q.Method == method && q.Path == path {
			n++
		}
	}
	return n
}

func problemJSON(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "https://renga.dev/problems/" + code, "title": code, "status": status, "error": code})
}

// registry is the installations fake deployments know: shared by two of them, it plays the
// part of an organization's archive carrying installations and public keys across a move.
type registry struct {
	mu   sync.Mutex
	keys map[string]ed25519.PublicKey
}

func newRegistry() *registry { return &registry{keys: map[string]ed25519.PublicKey{}} }

// fakeDeployment is a deployment's agent API, small enough to make it answer what a test
// needs: it checks intake keys and signatures as openapi.yaml specifies and keeps batches.
type fakeDeployment struct {
	*httptest.Server
	rec       *recorder
	reg       *registry
	intakeKey string // the key it issued ("" issues none)
	home      string // what its home request answers ("" its own URL)

	mu       sync.Mutex
	batches  map[string]int // batch_id → times received
	accepted []json.RawMessage
	status   map[string]func(w http.ResponseWriter) bool // by path: answer instead (true) or go on
	jobs     []map[string]any
	results  map[string]map[string]any
}

func newFakeDeployment(t *testing.T, reg *registry, intakeKey string) *fakeDeployment {
	d := &fakeDeployment{rec: &recorder{}, reg: reg, intakeKey: intakeKey, batches: map[string]int{},
		status: map[string]func(http.ResponseWriter) bool{}, results: map[string]map[string]any{}}
	d.Server = httptest.NewServer(d.rec.wrap(http.HandlerFunc(d.serve)))
	t.Cleanup(d.Close)
	return d
}

// answer makes path answer with f first (f returns false to let the request through).
func (d *fakeDeployment) answer(path string, f func(w http.ResponseWriter) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.status[path] = f
}

func (d *fakeDeployment) serve(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	override := d.status[r.URL.Path]
	home := d.home
	d.mu.Unlock()
	if override != nil && override(w) {
		return
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/agent/home":
		if home == "" {
			home = d.URL
		}
		_ = json.NewEncoder(w).Encode(map[string]string{"home": home})
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/agent/installations":
		if d.intakeKey == "" || r.Header.Get("Authorization") != "Bearer "+d.intakeKey {
			problemJSON(w, 401, "unauthenticated")
			return
		}
		var in struct {
			InstallationID string `json:"installation_id"`
			PublicKey      string `json:"public_key"`
		}
		_ = json.Unmarshal(body, &in)
		pub, err := base64.StdEncoding.DecodeString(in.PublicKey)
		if err != nil || len(pub) != ed25519.PublicKeySize {
			problemJSON(w, 400, "invalid_request")
			return
		}
		d.reg.mu.Lock()
		d.reg.keys[in.InstallationID] = pub
		d.reg.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]string{"installation_id": in.InstallationID})
	default:
		if !d.verify(r, body) {
			problemJSON(w, 401, "unauthenticated")
			return
		}
		d.signed(w, r, body)
	}
}

func (d *fakeDeployment) verify(r *http.Request, body []byte) bool {
	id := r.Header.Get("Renga-Installation")
	ts := r.Header.Get("Renga-Timestamp")
	sig, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(r.Header.Get("Renga-Signature"), "ed25519="))
	if err != nil {
		return false
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	d.reg.mu.Lock()
	pub := d.reg.keys[id]
	d.reg.mu.Unlock()
	return pub != nil && ed25519.Verify(pub, []byte(agent.StringToSign(r.Method, r.URL.RequestURI(), ts, id, body)), sig)
}

func (d *fakeDeployment) signed(w http.ResponseWriter, r *http.Request, body []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/agent/observations":
		var b struct {
			BatchID      string            `json:"batch_id"`
			Observations []json.RawMessage `json:"observations"`
		}
		if err := json.Unmarshal(body, &b); err != nil || b.BatchID == "" || len(b.Observations) == 0 {
			problemJSON(w, 400, "invalid_request")
			return
		}
		d.batches[b.BatchID]++
		dup := d.batches[b.BatchID] > 1
		if !dup {
			d.accepted = append(d.accepted, b.Observations...)
		}
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]any{"accepted": len(b.Observations), "duplicate": dup})
	case r.Method == http.MethodGet && r.URL.Path == "/api/v1/agent/jobs":
		items := []map[string]any{}
		for _, j := range d.jobs {
			if _, done := d.results[fmt.Sprint(j["id"])]; !done {
				items = append(items, j)
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"items": items})
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/v1/agent/jobs/"):
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/api/v1/agent/jobs/"), "/result")
		var res map[string]any
		_ = json.Unmarshal(body, &res)
		d.results[id] = res
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id})
	default:
		problemJSON(w, 404, "not_found")
	}
}

// sequences are the accepted observations' sequence numbers, in arrival order.
func (d *fakeDeployment) sequences() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []int
	for _, o := range d.accepted {
		var v struct {
			Data struct {
				Sequence int `json:"sequence"`
			} `json:"data"`
		}
		_ = json.Unmarshal(o, &v)
		out = append(out, v.Data.Sequence)
	}
	return out
}

// testKey is an intake key carrying ident ("" for none).
func testKey(ident string) string {
	secret := strings.Repeat("a", 52)
	if ident == "" {
		return agent.IntakeKeyPrefix + secret
	}
	return agent.IntakeKeyPrefix + ident + "_" + secret
}

// logBuffer collects an agent's log lines.
type logBuffer struct{ servertest.SyncBuffer }

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// running is an agent running in the test's process.
type running struct {
	*agent.Agent
	cfg    agent.Config
	logs   *logBuffer
	cancel context.CancelFunc
	done   chan error
}

// counter collects a fixed observation, one a call.
func counter(ctx context.Context) (string, map[string]any, error) {
	return "test.tick", map[string]any{"ok": true}, nil
}

func testConfig(t *testing.T, rengaURL, key string) agent.Config {
	return agent.Config{RengaURL: rengaURL, IntakeKey: key, StateDir: t.TempDir(), AllowInsecureHTTP: true,
		Interval: 100 * time.Millisecond, QueueMaxBytes: agent.MinQueueMaxBytes}
}

func testOptions(logs *logBuffer) agent.Options {
	return agent.Options{Logger: logs.logger(), Collect: counter, RetryInitial: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond,
		RequestTimeout: 2 * time.Second}
}

// start runs an agent until the test ends (or stop).
func start(t *testing.T, cfg agent.Config, opts *agent.Options) *running {
	t.Helper()
	logs := &logBuffer{}
	o := testOptions(logs)
	if opts != nil {
		o.Transport = opts.Transport
	}
	a, err := agent.New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Agent: a, cfg: cfg, logs: logs, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- a.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	<-r.done
	_ = r.Close()
}

// eventually waits up to 10 s for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *running) logged(msg string) bool {
	return strings.Contains(r.logs.String(), fmt.Sprintf("%q", msg))
}
