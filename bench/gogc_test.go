package bench

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"renga.dev/renga/server"
)

// TestRunShRunsServersAsServe: bench/run.sh runs its test servers with the collector target
// `renga serve` runs with when GOGC is unset (server.DefaultGCPercent), so that what it measures
// is what ships.
func TestRunShRunsServersAsServe(t *testing.T) {
	script, err := os.ReadFile("run.sh")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^gogc=\$\{BENCH_GOGC:-(\d+)\}`).FindSubmatch(script)
	if m == nil {
		t.Fatal("run.sh sets no default GOGC (gogc=${BENCH_GOGC:-N})")
	}
	if n, _ := strconv.Atoi(string(m[1])); n != server.DefaultGCPercent {
		t.Errorf("run.sh's default GOGC is %d, renga serve's %d", n, server.DefaultGCPercent)
	}
}
