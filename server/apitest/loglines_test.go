package apitest

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/servertest"
)

// TestServeLogLines: `renga serve` gathers its log lines and writes them together
// (RENGA_LOG_FLUSH_INTERVAL, server/logbuf). A request's access line is written within the
// interval with no other line after it, and the lines still held when the server is told to
// stop are written before it exits.
func TestServeLogLines(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	accessLine := func(p *process, id string) bool {
		for _, line := range strings.Split(p.logs.String(), "\n") {
			// In development the lines are text (key=value), as here; in production JSON.
			if strings.Contains(line, "msg=request") && strings.Contains(line, "request_id="+id) &&
				strings.Contains(line, "operation=getHome") {
				return true
			}
		}
		return false
	}
	home := func(p *process) string {
		t.Helper()
		r, err := sendTo(p, req{Method: http.MethodGet, Path: "/api/v1/agent/home"})
		if err != nil || r.Status != http.StatusOK || r.Header.Get("X-Request-Id") == "" {
			t.Fatalf("home: %d %v", r.Status, err)
		}
		return r.Header.Get("X-Request-Id")
	}

	// Held for up to 10 s: the stop writes it.
	held := startProcess(t, env, "RENGA_LOG_FLUSH_INTERVAL=10s")
	id := home(held)
	held.stop()
	if !accessLine(held, id) {
		t.Errorf("the access line of request %s is not in the logs of the stopped server:\n%s", id, held.logs.String())
	}
	if !strings.Contains(held.logs.String(), `msg="shutting down"`) {
		t.Errorf("the shutdown line is missing:\n%s", held.logs.String())
	}

	// Every 50 ms: it arrives while the server runs, with nothing after it.
	prompt := startProcess(t, env, "RENGA_LOG_FLUSH_INTERVAL=50ms")
	id = home(prompt)
	waitFor(t, 10*time.Second, "the access line of request "+id, func() bool { return accessLine(prompt, id) })
}

// TestLogFlushIntervalConfig: RENGA_LOG_FLUSH_INTERVAL is a duration from 0 (each line written
// at once) to 10 s, 100 ms unless set; anything else refuses to start, naming the variable.
func TestLogFlushIntervalConfig(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]time.Duration{"": 100 * time.Millisecond, "0": 0, "250ms": 250 * time.Millisecond,
		"10s": 10 * time.Second, "11s": -1, "-1ms": -1, "soon": -1} {
		cfg, err := server.LoadConfig(func(k string) string {
			if k == "RENGA_LOG_FLUSH_INTERVAL" {
				return v
			}
			return ""
		}, server.ModeRelease)
		if want < 0 {
			if err == nil || !strings.Contains(err.Error(), "RENGA_LOG_FLUSH_INTERVAL") {
				t.Errorf("RENGA_LOG_FLUSH_INTERVAL=%q: err %v, want one naming it", v, err)
			}
		} else if err != nil || cfg.LogFlushInterval != want {
			t.Errorf("RENGA_LOG_FLUSH_INTERVAL=%q: %s, err %v; want %s", v, cfg.LogFlushInterval, err, want)
		}
	}
}
