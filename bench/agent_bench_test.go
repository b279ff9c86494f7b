package bench

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/domain/policyfield"
	"renga.dev/renga/server/servertest"
)

// agent is one registered installation that signs its requests.
type agent struct {
	id  string
	key ed25519.PrivateKey
}

func registerAgents(b testing.TB, env *servertest.Env, n int) []agent {
	ctx := context.Background()
	o, err := domain.CreateOrganization(ctx, env.Pool, "intake", "Intake")
	if err != nil {
		b.Fatal(err)
	}
	doc := domain.PolicyDocument{policyfield.IntakeBytesPerDay: int64(1 << 50)}
	if _, _, _, err := domain.PutPolicy(ctx, env.Pool, o.ID, 1, doc, domain.BuiltinDefaults); err != nil {
		b.Fatal(err)
	}
	agents := make([]agent, n)
	for i := range agents {
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		id := fmt.Sprintf("ins_%026d", i)
		if _, _, err := domain.RegisterInstallation(ctx, env.Pool, o.ID, "", domain.Installation{ID: id, PublicKey: pub, Hostname: "h", OS: "linux"},
			domain.BuiltinDefaults); err != nil {
			b.Fatal(err)
		}
		agents[i] = agent{id: id, key: priv}
	}
	return agents
}

// batchBody is a ~1 KB signed batch of one observation (the baseline's payload).
// payload is the ~1 KB observation of ../shared/baselines (pgbench A's), read once, as pgbench
// reads it once.
var payload = sync.OnceValue(func() []byte {
	p, err := os.ReadFile("../../shared/baselines/payload.json")
	if err != nil {
		p = bytes.Repeat([]byte("x"), 900)
		p = []byte(`{"blob":"` + string(p) + `"}`)
	}
	return p
})

func batchBody(b testing.TB, batchID string) []byte {
	body, err := json.Marshal(map[string]any{"batch_id": batchID, "observations": []any{
		map[string]any{"observed_at": time.Now().UTC().Format(time.RFC3339), "kind": "host.facts", "data": json.RawMessage(payload())},
	}})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

func (a agent) signed(url, path string, body []byte) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
	ts, sig := a.sign(path, body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Renga-Installation", a.id)
	req.Header.Set("Renga-Timestamp", ts)
	req.Header.Set("Renga-Signature", sig)
	return req
}

// sign is the Renga-Timestamp and Renga-Signature headers of a POST of body to path, now.
func (a agent) sign(path string, body []byte) (ts, sig string) {
	ts = strconv.FormatInt(time.Now().Unix(), 10)
	s := ed25519.Sign(a.key, []byte(domain.StringToSign(http.MethodPost, path, ts, a.id, body)))
	return ts, "ed25519=" + base64.StdEncoding.EncodeToString(s)
}

// catchUpObservations is how many ~1 KB observations a catch-up batch holds: about 256 KiB,
// half of what the agent sends at most (agent/queue.go's maxBatchBytes) after an outage.
const catchUpObservations = 256

// largeBatchBody is a batch of catchUpObservations observations.
func largeBatchBody(b testing.TB, batchID string) []byte {
	obs := make([]any, catchUpObservations)
	for i := range obs {
		obs[i] = map[string]any{"observed_at": time.Now().UTC().Format(time.RFC3339), "kind": "host.facts", "data": json.RawMessage(payload())}
	}
	body, err := json.Marshal(map[string]any{"batch_id": batchID, "observations": obs})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// BenchmarkIntakeCatchUp is BenchmarkIntake with batches of about 256 KiB, as agents send them
// catching up after an outage: what a group's 1 MiB bound and the intake statements running at
// once (RENGA_INTAKE_STATEMENTS) leave of the rate when few batches fit in a group.
func BenchmarkIntakeCatchUp(b *testing.B) {
	env := servertest.Start(b)
	runIntakeBodies(b, env.URL, env.Pool, registerAgents(b, env, 16), largeBatchBody)
}

// BenchmarkIntake sends signed ~1 KB batches from 16 concurrent agents (each batch new), as
// fast as the server accepts them; it reports accepted batches/s and p50/p99 latency.
func BenchmarkIntake(b *testing.B) {
	env := servertest.Start(b)
	runIntake(b, env.URL, env.Pool, registerAgents(b, env, 16))
}

// runIntake sends b.N signed batches to url, one goroutine per agent, and reports the rate,
// the latency and the CPU per batch (pool: the database the server writes to).
func runIntake(b *testing.B, url string, pool *pgxpool.Pool, agents []agent) {
	runIntakeBodies(b, url, pool, agents, batchBody)
}

// runIntakeBodies is runIntake with the batches body makes.
func runIntakeBodies(b *testing.B, url string, pool *pgxpool.Pool, agents []agent, body func(testing.TB, string) []byte) {
	c := httpClient()
	var n atomic.Int64
	var lat latencies
	cpu := startCPU(b, pool)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Go(func() {
			for {
				i := n.Add(1)
				if i > int64(b.N) {
					return
				}
				req := a.signed(url, "/api/v1/agent/observations", body(b, fmt.Sprint("b-", i)))
				t0 := time.Now()
				do(b, c, req, http.StatusAccepted)
				lat.add(time.Since(t0))
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "batches/s")
	lat.report(b)
	cpu.report(b, b.N)
}

// BenchmarkHome is the unauthenticated home request through the whole pipeline.
func BenchmarkHome(b *testing.B) {
	env := servertest.Start(b)
	c := httpClient()
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodGet, env.URL+"/api/v1/agent/home?deployment=eu1", nil)
			do(b, c, req, http.StatusOK)
		}
	})
	reportRate(b, start)
}

// BenchmarkBareHandler is the ceiling for the home request: net/http answering a constant.
func BenchmarkBareHandler(b *testing.B) {
	body := []byte(`{"home":"http://renga.test"}` + "\n")
	ts := newConstantServer(body)
	defer ts.Close()
	c := httpClient()
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodGet, ts.URL+"/api/v1/agent/home?deployment=eu1", nil)
			do(b, c, req, http.StatusOK)
		}
	})
	reportRate(b, start)
}

// BenchmarkHomeHandler calls the server's handler for the home request directly, one request
// at a time, with no network and no load generator: the CPU the server's own code (access log,
// routing, stages, handler) costs per request, apart from net/http's connection handling. Its
// figure moves less than a rate's on a shared machine, so it tells a change to the pipeline
// apart from noise.
func BenchmarkHomeHandler(b *testing.B) {
	env := servertest.Start(b)
	h := env.Server.Handler()
	req := httptest.NewRequest(http.MethodGet, "/api/v1/agent/home?deployment=eu1", nil)
	req.RemoteAddr = "127.0.0.1:40000"
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != http.StatusOK {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}
