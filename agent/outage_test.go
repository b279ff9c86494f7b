package agent_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"renga.dev/renga/agent"
	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// The home unreachable for a while (every connection dropped), with the agent killed during the
// outage: it backs off without a hot loop, keeps what it collects, and once the home is back
// everything arrives exactly once.
func TestAgentProcessThroughAnOutage(t *testing.T) {
	t.Parallel()
	bin := rengaBinary(t)
	ctx := context.Background()
	// The home is a proxy in front of the server; the server's public URL is the proxy's.
	var down atomic.Bool
	var duringOutage atomic.Int64
	front := httptest.NewUnstartedServer(nil)
	env := servertest.Start(t, func(c *server.Config) { c.PublicURL = "http://" + front.Listener.Addr().String() })
	target, _ := url.Parse(env.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	front.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			duringOutage.Add(1)
			hj, ok := w.(http.Hijacker)
			if !ok {
				t.Error("no hijacker")
				return
			}
			conn, _, err := hj.Hijack()
			if err == nil {
				_ = conn.Close() // the connection drops, as a dead host's would
			}
			return
		}
		proxy.ServeHTTP(w, r)
	})
	front.Start()
	defer front.Close()

	org, err := domain.CreateOrganization(ctx, env.Pool, "outage", "Outage")
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := domain.CreateIntakeKey(ctx, env.Pool, org.ID, "hosts", "")
	if err != nil {
		t.Fatal(err)
	}
	env.Track(key)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	config := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(config, []byte("renga_url: "+front.URL+"\nintake_key: "+key+"\nstate_dir: "+state+
		"\nallow_insecure_http: true\ninterval: 100ms\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startAgentProcess(t, bin, config)
	var installationID string
	eventually(t, "observations", func() bool {
		id, err := agent.LoadIdentity(state)
		if err == nil {
			installationID = id.InstallationID
		}
		return err == nil && len(sequencesAt(t, env, installationID)) >= 3
	})

	down.Store(true)
	outage := time.Now()
	time.Sleep(3 * time.Second)
	p.signal(t, syscall.SIGKILL) // killed mid-outage
	p = startAgentProcess(t, bin, config)
	time.Sleep(3 * time.Second)
	// The restarted agent keeps collecting while the home is down (one observation per 100 ms;
	// fewer on a busy machine, where a collection can outlast the interval).
	var st agent.Status
	eventually(t, "10 observations queued during the outage", func() bool { st = statusOf(t, bin, config); return st.Depth >= 10 })
	// Back-off from 1 s, restarted once: a handful of attempts, not a hot loop (the collector
	// adds one observation every 100 ms, and must not trigger a send each). At most one
	// attempt per second of outage, plus the two first attempts of each run, bounds what a
	// back-off doubling from 1 s makes; a send per observation would make ten per second.
	n, elapsed := duringOutage.Load(), time.Since(outage)
	t.Logf("%d requests during the outage of %v; queued %+v", n, elapsed.Round(time.Millisecond), st)
	if n < 2 || n > 4+int64(elapsed/time.Second) {
		t.Errorf("%d requests during an outage of %v", n, elapsed)
	}
	down.Store(false)
	eventually(t, "the queue drained", func() bool { s := statusOf(t, bin, config); return s.Depth == 0 && !s.AsOf.IsZero() })
	p.signal(t, syscall.SIGTERM)

	exactlyOnce(t, sequencesAt(t, env, installationID), state)
}

// statusOf runs `renga agent status -o json`.
func statusOf(t *testing.T, bin, config string) agent.Status {
	t.Helper()
	out, err := exec.Command(bin, "-o", "json", "agent", "status", "--config", config).Output()
	if err != nil {
		t.Fatalf("agent status: %v %s", err, out)
	}
	var s agent.Status
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatalf("agent status output %q: %v", out, err)
	}
	return s
}
