package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/servertest"
)

// TestIntakeLoad is the intake load script: two server processes' worth of handlers (two HTTP
// servers on one database), 16 agents split between them. It finds the maximum rate of signed
// ~1 KB batches, then sends at half that rate and reports p50/p99. Run with RENGA_LOAD=1
// (bench/run.sh does).
func TestIntakeLoad(t *testing.T) {
	if os.Getenv("RENGA_LOAD") == "" {
		t.Skip("load script: set RENGA_LOAD=1")
	}
	env := servertest.Start(t)
	second, err := server.New(env.Config, env.Pool, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ts2 := httptest.NewServer(second.Handler())
	defer ts2.Close()
	urls := []string{env.URL, ts2.URL}
	agents := registerAgents(t, env, 16)
	// As every measured run here starts (startCPU, bench/run.sh): right after a CHECKPOINT, so
	// that the dirty pages earlier benchmarks left are not written out in the middle of the
	// paced run, where a checkpoint would dominate its p99.
	if _, err := env.Pool.Exec(context.Background(), "CHECKPOINT"); err != nil {
		t.Fatal(err)
	}
	c := httpClient()
	var seq atomic.Int64
	send := func(i int) time.Duration {
		a := agents[i%len(agents)]
		req := a.signed(urls[i%2], "/api/v1/agent/observations", batchBody(t, fmt.Sprint("load-", seq.Add(1))))
		t0 := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("status %d", resp.StatusCode)
		}
		return time.Since(t0)
	}

	// Maximum: 16 agents as fast as accepted, for 10 s.
	var n atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(10 * time.Second)
	start := time.Now()
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				send(w)
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	maxRate := float64(n.Load()) / time.Since(start).Seconds()

	// Half the maximum, paced, for 10 s.
	logged := len(env.Logs.String()) // the first server's access lines before it
	rate := maxRate / 2
	interval := time.Duration(float64(time.Second) / rate)
	var mu sync.Mutex
	var lat []time.Duration
	watch := watchPhase(t, env.DBURL)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	stop := time.After(10 * time.Second)
	i := 0
loop:
	for {
		select {
		case <-stop:
			break loop
		case <-tick.C:
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				d := send(i)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}(i)
			i++
		}
	}
	wg.Wait()
	during := watch.finish(t)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	p := func(q int) float64 { return float64(lat[len(lat)*q/100].Microseconds()) / 1000 }
	fmt.Printf("intake-load max=%.0f batches/s  half-rate=%.0f/s  p50=%.2fms  p99=%.2fms  (n=%d)  peak RSS of the process (two servers and the load) %s  %s\n",
		maxRate, rate, p(50), p(99), len(lat), peakRSS(), serverLatency(t, env.Logs.String()[logged:]))
	fmt.Printf("intake-load during the half-rate phase: %s\n", during)
}

// serverLatency is the median and 99th percentile of the durations the server's access lines
// (logs, one JSON line per request) give its accepted batches: the time from the request's
// arrival to its answer, without the load generator's own wait. Beside the load's figures it
// tells the server's tail from the machine's.
func serverLatency(t *testing.T, logs string) string {
	var ds []time.Duration
	for _, line := range strings.Split(logs, "\n") {
		var l struct {
			Operation string `json:"operation"`
			Status    int    `json:"status"`
			Duration  int64  `json:"duration"`
		}
		if json.Unmarshal([]byte(line), &l) != nil || l.Operation != "submitObservations" || l.Status != http.StatusAccepted {
			continue
		}
		ds = append(ds, time.Duration(l.Duration))
	}
	if len(ds) == 0 {
		t.Fatal("no access line of an accepted batch in the server's log")
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	q := func(p int) float64 { return float64(ds[len(ds)*p/100].Microseconds()) / 1000 }
	return fmt.Sprintf("the first server's own p50=%.2fms p99=%.2fms (n=%d, its access lines)", q(50), q(99), len(ds))
}

// peakRSS is the process's peak resident set (VmHWM), as Linux reports it.
func peakRSS() string {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return "unknown"
}
