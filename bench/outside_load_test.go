package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
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
//   - BenchmarkOutsideFloorGetOrganization: the same request from floorGetServer;
//   - BenchmarkOutsideCreateOrganization: keyed creates from one connection, one at a time: the
//     latency (p50-ms, p99-ms) a lone caller sees, beside pgbench C's at one client;
//   - BenchmarkOutsideFloorCreateOrganization: the same creates from floorCreateServer;
//   - BenchmarkOutsideIntake: 16 agents' signed ~1 KB batches (BenchmarkIntake's), each new,
//     signed before the measure (intakeScript), beside pgbench A;
//   - BenchmarkOutsideFloorIntake: the same batches from floorIntakeServer.
//
// The first three are measured in turns, in four slices each of whole seconds adding up to the
// measure's length (bare, bare logged, home, bare, ...), and each one's slices added up: home's
// ratio is to its ceilings measured over the same seconds, not over the seconds before it
// (measureInTurns).
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
	writer := env.Token(t, "organizations:write")
	floorCreate := floorCreateServer(t, env, writer)
	var agents []agent
	var floorIntake *httptest.Server
	if only.MatchString("Intake") || only.MatchString("FloorIntake") {
		agents = registerAgents(t, env, 16)
		floorIntake = floorIntakeServer(t, env, agents)
	}
	intake := func(prefix string) func() []string {
		return func() []string {
			return []string{"-s", intakeScript(t, dir, prefix, agents, 2, secs*outsideIntakeRate)}
		}
	}
	measures := []outsideMeasure{
		// Home and its two ceilings are compared with one another: they are measured in turns
		// (group "home"), in slices, so that the machine's drift over a measure falls on the
		// three alike.
		{name: "Bare", url: bare.URL + home, conns: 8, group: "home"},
		{name: "BareLogged", url: logged.URL + home, conns: 8, group: "home"},
		{name: "Home", url: env.URL + home, conns: 8, group: "home"},
		{name: "GetOrganization", url: env.URL, conns: 8, args: []string{"-H", auth, "-s", rotate}},
		{name: "FloorGetOrganization", url: floor.URL, conns: 8, args: []string{"-H", auth, "-s", rotate}},
		// One client, one create at a time: the latency a lone caller sees, beside pgbench C at
		// one client. The two servers share a database: each its own slugs and keys.
		{name: "CreateOrganization", url: env.URL, conns: 1, args: []string{"-s", createScript(t, dir, "w", writer)}},
		{name: "FloorCreateOrganization", url: floorCreate.URL, conns: 1, args: []string{"-s", createScript(t, dir, "f", writer)}},
		// 16 agents' signed batches, each new, signed before the measure: the agents' signing
		// is theirs, on their hosts (pgbench A's client prepares nothing either).
		{name: "Intake", url: env.URL, conns: 16, script: intake("r")},
		{name: "FloorIntake", url: urlOf(floorIntake), conns: 16, script: intake("f")},
	}
	var picked []outsideMeasure
	for _, m := range measures {
		if only.MatchString(m.name) {
			picked = append(picked, m)
		}
	}
	for len(picked) > 0 {
		n := 1
		for n < len(picked) && picked[0].group != "" && picked[n].group == picked[0].group {
			n++
		}
		for _, r := range measureInTurns(t, wrk, env, picked[:n], secs) {
			fmt.Printf("BenchmarkOutside%s\t%d\t%.0f req/s\t%.3f p50-ms\t%.3f p99-ms\t%.1f go-cpu-us/op\t%.1f pg-cpu-us/op\n",
				r.name, r.n, r.rate(), r.p50().Seconds()*1e3, r.p99.Seconds()*1e3, r.self/float64(r.n), r.pg/float64(r.n))
		}
		picked = picked[n:]
	}
}

// outsideMeasure is one of TestOutsideLoad's measures: wrk with conns connections against url.
type outsideMeasure struct {
	name, url string
	conns     int
	args      []string
	script    func() []string // more arguments, made right before each run of wrk
	// group: measures of one group, next to one another in the list, are measured in turns.
	group string
}

// outsideSlices is how many turns the measures of a group take, each a slice of the measure's
// length. On these shared machines a measure's rate drifts by 10–20 % within a minute; measured
// one after the other, two measures seconds apart took that drift as a difference between them.
const outsideSlices = 4

// outsideTally is what a measure's runs of wrk added up to.
type outsideTally struct {
	name     string
	n        int
	seconds  float64         // the runs' measured time (requests over wrk's rate)
	pg, self float64         // CPU of the database's backends and of this process, µs
	p50s     []time.Duration // each run's median latency
	p99      time.Duration   // the highest of the runs' 99th percentiles
}

func (r outsideTally) rate() float64 { return float64(r.n) / r.seconds }

// p50 is the median of the runs' medians.
func (r outsideTally) p50() time.Duration {
	s := slices.Clone(r.p50s)
	slices.Sort(s)
	return s[len(s)/2]
}

// measureInTurns runs the measures secs seconds each: one run of wrk each when alone, and when
// several, outsideSlices runs each, in turns (a, b, c, a, b, c, ...), of whole seconds adding up
// to secs (10: 3, 3, 2, 2), added up.
func measureInTurns(t *testing.T, wrk string, env *servertest.Env, ms []outsideMeasure, secs int) []outsideTally {
	turns := 1
	if len(ms) > 1 {
		turns = min(outsideSlices, secs)
	}
	tallies := make([]outsideTally, len(ms))
	for turn := range turns {
		slice := secs / turns
		if turn < secs%turns {
			slice++
		}
		for i, m := range ms {
			extra := m.args
			if m.script != nil {
				extra = m.script()
			}
			cpu := startCPU(t, env.Pool)
			threads := min(2, m.conns)
			args := append([]string{fmt.Sprint("-t", threads), fmt.Sprint("-c", m.conns), fmt.Sprint("-d", slice, "s"), "--latency"}, extra...)
			out, err := exec.Command(wrk, append(args, m.url)...).CombinedOutput()
			if err != nil {
				t.Fatalf("wrk %s: %v\n%s", m.name, err, out)
			}
			if strings.Contains(string(out), intakeExhausted) {
				t.Fatalf("wrk %s: sent every prepared batch before the end; raise outsideIntakeRate\n%s", m.name, out)
			}
			n, rate, err := wrkResult(string(out))
			if err != nil {
				t.Fatalf("wrk %s: %v\n%s", m.name, err, out)
			}
			p50, p99, err := wrkLatency(string(out))
			if err != nil {
				t.Fatalf("wrk %s: %v\n%s", m.name, err, out)
			}
			pg, self := cpu.since(t, n)
			r := &tallies[i]
			r.name = m.name
			r.n += n
			r.seconds += float64(n) / rate
			r.pg += pg * float64(n)
			r.self += self * float64(n)
			r.p50s = append(r.p50s, p50)
			r.p99 = max(r.p99, p99)
		}
	}
	return tallies
}

// outsideIntakeRate is how many batches per second of the measure the intake measures prepare:
// more than a server on this machine accepts (wrk failing the measure says when it is not).
const outsideIntakeRate = 16000

// intakeExhausted is what intakeScript's wrk script prints when a thread sent all its batches.
const intakeExhausted = "sent every prepared batch"

func urlOf(s *httptest.Server) string {
	if s == nil {
		return ""
	}
	return s.URL
}

// intakeScript prepares n signed batches (~1 KB, each new, batch IDs prefix-1, prefix-2, ...;
// agents in turn) in one file for each of wrk's threads, one request a line, and writes a wrk
// script that sends each thread's file in order. The signatures are made now, in parallel, so
// that the measure's load generator only sends: they stay valid for domain.SignatureSkew.
func intakeScript(t testing.TB, dir, prefix string, agents []agent, threads, n int) string {
	const path = "/api/v1/agent/observations"
	var wg sync.WaitGroup
	errs := make([]error, threads)
	for th := range threads {
		wg.Go(func() {
			f, err := os.Create(filepath.Join(dir, fmt.Sprintf("intake-%s-%d.txt", prefix, th+1)))
			if err != nil {
				errs[th] = err
				return
			}
			w := bufio.NewWriterSize(f, 1<<20)
			for i := th; i < n; i += threads {
				a := agents[i%len(agents)]
				body := batchBody(t, fmt.Sprint(prefix, "-", i))
				ts, sig := a.sign(path, body)
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", a.id, ts, sig, body)
			}
			errs[th] = errors.Join(w.Flush(), f.Close())
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "intake-"+prefix+".lua")
	err := os.WriteFile(script, []byte(fmt.Sprintf(`local threads, count = {}, 0
function setup(thread)
  count = count + 1
  thread:set("id", count)
  table.insert(threads, thread)
end
function init(args)
  batches = assert(io.open(%q .. "/intake-%s-" .. id .. ".txt", "r"))
end
function request()
  local line = batches:read("*l")
  if line == nil then
    exhausted = true
    batches:seek("set", 0)
    line = batches:read("*l")
  end
  local installation, ts, sig, body = line:match("^([^	]*)	([^	]*)	([^	]*)	(.*)$")
  return wrk.format("POST", %q, {["Content-Type"] = "application/json", ["Renga-Installation"] = installation,
    ["Renga-Timestamp"] = ts, ["Renga-Signature"] = sig}, body)
end
function done(summary, latency, requests)
  for _, thread in ipairs(threads) do
    if thread:get("exhausted") then io.write(%q .. "\n") end
  end
end
`, dir, prefix, path, intakeExhausted)), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return script
}

// createScript writes a wrk script that sends keyed creates of organizations, each with its own
// slug and Idempotency-Key (prefix-1, prefix-2, ...), as the Go benchmarks' clients do.
func createScript(t testing.TB, dir, prefix, token string) string {
	path := filepath.Join(dir, "create-"+prefix+".lua")
	script := fmt.Sprintf(`local i = 0
local headers = {["Authorization"] = %q, ["Content-Type"] = "application/json"}
request = function()
  i = i + 1
  headers["Idempotency-Key"] = "%s-" .. i
  local body = '{"slug":"%s-' .. i .. '","display_name":"Organization ' .. i .. '"}'
  return wrk.format("POST", "/api/v1/operator/organizations", headers, body)
end
`, "Bearer "+token, prefix, prefix)
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
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
// to a file, as the server's access log does (the same fields, the server's JSON handler (logbuf.NewJSONHandler), lines
// gathered and written together as renga serve's are, server/logbuf): the least a server that
// logs every request does.
func newLoggedConstantServer(t testing.TB, body []byte) *httptest.Server {
	logs := servertest.NewLogFile(t)
	lw := logbuf.New(logs, server.DefaultLogFlushInterval)
	h := logbuf.NewJSONHandler(lw, nil)
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

var wrkPercentile = regexp.MustCompile(`(?m)^\s*(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)

// wrkLatency reads the median and the 99th percentile of wrk's latency distribution (--latency).
func wrkLatency(out string) (p50, p99 time.Duration, err error) {
	unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}
	for _, m := range wrkPercentile.FindAllStringSubmatch(out, -1) {
		v, perr := strconv.ParseFloat(m[2], 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("latency %q: %w", m[0], perr)
		}
		d := time.Duration(v * float64(unit[m[3]]))
		if m[1] == "50" {
			p50 = d
		} else {
			p99 = d
		}
	}
	if p50 == 0 || p99 == 0 {
		return 0, 0, fmt.Errorf("no latency distribution in its report")
	}
	return p50, p99, nil
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

// TestWrkLatency reads the latency distribution wrk writes with --latency.
func TestWrkLatency(t *testing.T) {
	report := "  Latency Distribution\n     50%  826.00us\n     75%    1.02ms\n     90%    1.50ms\n     99%    2.83ms\n"
	p50, p99, err := wrkLatency(report)
	if err != nil || p50 != 826*time.Microsecond || p99 != 2830*time.Microsecond {
		t.Fatalf("got %v %v %v", p50, p99, err)
	}
	if p50, p99, err := wrkLatency(strings.ReplaceAll(report, "ms", "s")); err != nil || p50 != 826*time.Microsecond || p99 != 2830*time.Millisecond {
		t.Fatalf("in seconds: got %v %v %v", p50, p99, err)
	}
	for _, bad := range []string{"", strings.Replace(report, "     99%    2.83ms\n", "", 1), strings.Replace(report, "50%", "55%", 1)} {
		if _, _, err := wrkLatency(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}
