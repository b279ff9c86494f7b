package bench

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/logbuf"
	"renga.dev/renga/server/servertest"
)

// TestOutsideLoad measures the API as a client outside the server's process sees it: wrk, a
// load generator written in C that runs in its own process, as lean per request as pgbench's
// client is per transaction. The Go benchmarks' load generator is Go's own HTTP client in the
// server's process: it costs about as much CPU per request as the server's net/http does, so
// it hides part of what the server costs (a server twice as costly as another is far less than
// twice as slow beside it). Here this process is the server alone, and its CPU per request
// (go-cpu-us/op) is the server's.
//
// Each measure prints a line in the Go benchmarks' format, which bench/run.sh reads:
//
//   - BenchmarkOutsideBare: net/http answering a constant (home's ceiling, as BenchmarkBareHandler);
//   - BenchmarkOutsideBareLogged: the same, writing one access line per request to a file with
//     log/slog's JSON handler, as the server does (what a server that logs each request can
//     reach at most);
//   - BenchmarkOutsideHome: GET /api/v1/agent/home from the server;
//   - BenchmarkOutsideGetOrganization: the authenticated read, rotating over 100 organizations;
//   - BenchmarkOutsideFloorGetOrganization: the same request from floorGetServer.
//
// RENGA_OUTSIDE_BENCH=1 runs it (wrk on PATH: apt-get install wrk); RENGA_OUTSIDE_SECONDS is each
// measure's length (8); RENGA_OUTSIDE_ONLY, a regular expression, picks measures by name (with
// -test.cpuprofile, a profile of the server alone serving one kind of request).
func TestOutsideLoad(t *testing.T) {
	if os.Getenv("RENGA_OUTSIDE_BENCH") == "" {
		t.Skip("RENGA_OUTSIDE_BENCH=1 runs the measurement from outside the process (bench/run.sh does)")
	}
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		t.Fatal("wrk is not installed (apt-get install wrk)")
	}
	secs := 8
	if v := os.Getenv("RENGA_OUTSIDE_SECONDS"); v != "" {
		if secs, err = strconv.Atoi(v); err != nil || secs < 1 {
			t.Fatalf("RENGA_OUTSIDE_SECONDS=%q: a whole number of seconds", v)
		}
	}
	only := regexp.MustCompile(os.Getenv("RENGA_OUTSIDE_ONLY"))
	env := servertest.Start(t)
	token := env.Token(t, "organizations:read")
	ids := floorOrganizations(t, env, 100)
	body := []byte(`{"home":"http://renga.test"}` + "\n")
	bare := newConstantServer(body)
	t.Cleanup(bare.Close)
	logged := newLoggedConstantServer(t, body)
	floor := floorGetServer(t, env)

	dir := t.TempDir()
	rotate := filepath.Join(dir, "rotate.lua")
	var quoted []string
	for _, id := range ids {
		quoted = append(quoted, strconv.Quote("/api/v1/operator/organizations/"+id))
	}
	// Each request the next of the organizations, as the Go benchmarks ask for them.
	script := "local paths = {" + strings.Join(quoted, ", ") + "}\nlocal i = 0\n" +
		"request = function()\n  i = i + 1\n  return wrk.format(\"GET\", paths[i % #paths + 1])\nend\n"
	if err := os.WriteFile(rotate, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	const home = "/api/v1/agent/home?deployment=eu1"
	auth := "Authorization: Bearer " + token
	for _, m := range []struct {
		name, url string
		conns     int
		args      []string
	}{
		{"Bare", bare.URL + home, 8, nil},
		{"BareLogged", logged.URL + home, 8, nil},
		{"Home", env.URL + home, 8, nil},
		{"GetOrganization", env.URL, 8, []string{"-H", auth, "-s", rotate}},
		{"FloorGetOrganization", floor.URL, 8, []string{"-H", auth, "-s", rotate}},
	} {
		if !only.MatchString(m.name) {
			continue
		}
		cpu := startCPU(t, env.Pool)
		args := append([]string{"-t2", fmt.Sprint("-c", m.conns), fmt.Sprint("-d", secs, "s")}, m.args...)
		out, err := exec.Command(wrk, append(args, m.url)...).CombinedOutput()
		if err != nil {
			t.Fatalf("wrk %s: %v\n%s", m.name, err, out)
		}
		n, rate, err := wrkResult(string(out))
		if err != nil {
			t.Fatalf("wrk %s: %v\n%s", m.name, err, out)
		}
		pg, self := cpu.since(t, n)
		fmt.Printf("BenchmarkOutside%s\t%d\t%.0f req/s\t%.1f go-cpu-us/op\t%.1f pg-cpu-us/op\n", m.name, n, rate, self, pg)
	}
}

var (
	wrkRequests = regexp.MustCompile(`(?m)^\s*(\d+) requests in `)
	wrkRate     = regexp.MustCompile(`(?m)^Requests/sec:\s*([0-9.]+)`)
	wrkFailures = regexp.MustCompile(`(?m)^\s*(Non-2xx or 3xx responses|Socket errors):.*$`)
)

// wrkResult reads wrk's report: the requests it made and their rate. Any failed request or
// socket error fails the measure: a rate of refusals measures nothing.
func wrkResult(out string) (int, float64, error) {
	if f := wrkFailures.FindString(out); f != "" {
		return 0, 0, fmt.Errorf("failures: %s", strings.TrimSpace(f))
	}
	n, rate := wrkRequests.FindStringSubmatch(out), wrkRate.FindStringSubmatch(out)
	if n == nil || rate == nil {
		return 0, 0, fmt.Errorf("no result in its report")
	}
	requests, _ := strconv.Atoi(n[1])
	r, _ := strconv.ParseFloat(rate[1], 64)
	if requests == 0 {
		return 0, 0, fmt.Errorf("no request answered")
	}
	return requests, r, nil
}

// newLoggedConstantServer answers body to every request and writes one access line per request
// to a file, as the server's access log does (the same fields, log/slog's JSON handler, lines
// gathered and written together as renga serve's are, server/logbuf): the least a server that
// logs every request does.
func newLoggedConstantServer(t testing.TB, body []byte) *httptest.Server {
	logs := servertest.NewLogFile(t)
	lw := logbuf.New(logs, server.DefaultLogFlushInterval)
	h := slog.NewJSONHandler(lw, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
		line := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
		line.AddAttrs(slog.String("request_id", "req_01m8xd6y1a0y34e276dk93y570"),
			slog.String("method", r.Method), slog.String("route", "/api/v1/agent/home"), slog.String("operation", "getHome"),
			slog.Int("status", http.StatusOK), slog.Duration("duration", time.Since(start)),
			slog.String("actor", ""), slog.String("source", "127.0.0.1"))
		_ = h.Handle(context.Background(), line)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestWrkResult reads the reports wrk writes.
func TestWrkResult(t *testing.T) {
	ok := "Running 8s test @ http://127.0.0.1:1/\n  2 threads and 8 connections\n" +
		"  164004 requests in 8.00s, 23.46MB read\nRequests/sec:  20500.27\nTransfer/sec:      2.93MB\n"
	n, rate, err := wrkResult(ok)
	if err != nil || n != 164004 || rate != 20500.27 {
		t.Fatalf("got %d %v %v", n, rate, err)
	}
	for _, bad := range []string{
		strings.Replace(ok, "Requests/sec", "  Non-2xx or 3xx responses: 12\nRequests/sec", 1),
		strings.Replace(ok, "Requests/sec", "  Socket errors: connect 0, read 1, write 0, timeout 0\nRequests/sec", 1),
		"unable to connect to 127.0.0.1:1 Connection refused\n",
	} {
		if _, _, err := wrkResult(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
