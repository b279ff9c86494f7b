// Package bench measures the operator API over real HTTP on real PostgreSQL. Run with
// bench/run.sh, which also measures PostgreSQL's own ceiling (pgbench) in the same run and
// prints the ratios of ../shared/baselines.
package bench

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"renga.dev/renga/server/servertest"
)

func TestMain(m *testing.M) { servertest.Main(m) }

func httpClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}}
}

func do(b testing.TB, c *http.Client, req *http.Request, want int) {
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		b.Fatalf("%s %s: %d", req.Method, req.URL.Path, resp.StatusCode)
	}
}

// latencies records durations and reports p50/p99.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	sort.Slice(l.d, func(i, j int) bool { return l.d[i] < l.d[j] })
	if len(l.d) == 0 {
		return
	}
	b.ReportMetric(float64(l.d[len(l.d)*50/100].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(l.d[len(l.d)*99/100].Microseconds())/1000, "p99-ms")
}

func reportRate(b *testing.B, start time.Time) {
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "req/s")
}

// BenchmarkHealthz is the same server's floor: no authentication, no database.
func BenchmarkHealthz(b *testing.B) {
	env := servertest.Start(b)
	c := httpClient()
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodGet, env.URL+"/healthz", nil)
			do(b, c, req, http.StatusOK)
		}
	})
	reportRate(b, start)
}

// BenchmarkGetOrganization is an authenticated read: token checked (hash, expiry, revocation,
// source) on every request, then the organization.
func BenchmarkGetOrganization(b *testing.B) {
	env := servertest.Start(b)
	token := env.Token(b, "organizations:write")
	c := httpClient()
	ids := createOrganizationPaths(b, c, env.URL, token, 100)
	var n atomic.Int64
	b.SetParallelism(4)
	cpu := startCPU(b, env.Pool)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodGet, env.URL+ids[n.Add(1)%int64(len(ids))], nil)
			req.Header.Set("Authorization", "Bearer "+token)
			do(b, c, req, http.StatusOK)
		}
	})
	reportRate(b, start)
	cpu.report(b, b.N)
}

// createOrganizationPaths creates n organizations and returns their paths (each create's
// Location).
func createOrganizationPaths(b *testing.B, c *http.Client, url, token string, n int) []string {
	paths := make([]string, n)
	for i := range paths {
		req, _ := http.NewRequest(http.MethodPost, url+"/api/v1/operator/organizations",
			bytes.NewBufferString(fmt.Sprintf(`{"slug":"bench-%d","display_name":"Bench %d"}`, i, i)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", fmt.Sprint("setup-", i))
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			b.Fatal(resp.StatusCode)
		}
		paths[i] = resp.Header.Get("Location")
	}
	return paths
}

func createOrganizations(b *testing.B, clients int) {
	env := servertest.Start(b)
	postOrganizations(b, env.URL, env.Pool, env.Token(b, "organizations:write"), clients)
}

// postOrganizations sends b.N keyed creates to url from clients concurrent clients and reports
// the rate, p50/p99 latency and the CPU per create (pool: the database the server writes to).
func postOrganizations(b *testing.B, url string, pool *pgxpool.Pool, token string, clients int) {
	c := httpClient()
	var n atomic.Int64
	var lat latencies
	cpu := startCPU(b, pool)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				i := n.Add(1)
				if i > int64(b.N) {
					return
				}
				req, _ := http.NewRequest(http.MethodPost, url+"/api/v1/operator/organizations",
					bytes.NewBufferString(fmt.Sprintf(`{"slug":"org-%d","display_name":"Organization %d"}`, i, i)))
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", fmt.Sprint("key-", i))
				t0 := time.Now()
				do(b, c, req, http.StatusCreated)
				lat.add(time.Since(t0))
			}
		})
	}
	wg.Wait()
	reportRate(b, start)
	lat.report(b)
	cpu.report(b, b.N)
}

// BenchmarkCreateOrganization is a keyed, audited create: idempotency record, organization,
// audit event and Activity in one transaction.
func BenchmarkCreateOrganization(b *testing.B) {
	b.Run("clients=1", func(b *testing.B) { createOrganizations(b, 1) })
	b.Run("clients=8", func(b *testing.B) { createOrganizations(b, 8) })
}

func newConstantServer(body []byte) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
}
