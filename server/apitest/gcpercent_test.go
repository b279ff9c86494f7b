package apitest

import (
	"bufio"
	"net/http"
	"strings"
	"testing"

	"renga.dev/renga/server"
	"renga.dev/renga/server/servertest"
)

// TestServeGCPercent: `renga serve` runs its collector at server.DefaultGCPercent, as its
// /metrics says, unless GOGC is set in its environment, which it then follows.
func TestServeGCPercent(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	if server.DefaultGCPercent != 400 {
		t.Fatalf("DefaultGCPercent is %d: the test expects 400", server.DefaultGCPercent)
	}
	for _, c := range []struct {
		extra []string
		want  string
	}{
		{nil, "400"},
		{[]string{"GOGC=150"}, "150"},
	} {
		p := startProcess(t, env, c.extra...)
		resp, err := http.Get(p.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "go_gc_gogc_percent "); ok {
				got = v
			}
		}
		resp.Body.Close()
		if got != c.want {
			t.Errorf("renga serve with %v: go_gc_gogc_percent %q, want %q", c.extra, got, c.want)
		}
		p.stop()
	}
}
