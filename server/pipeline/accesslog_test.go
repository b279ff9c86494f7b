package pipeline

import (
	"maps"
	"path"
	"sync"
	"testing"
	"time"
)

func TestClean(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/api/v1/operator/organizations": true, "/api/v1/operator/organizations/": true,
		"/healthz": true, "": false, "//": false, "/api//v1": false, "/api/./v1": false, "/api/v1/..": false,
		"/api/v1/x/../y": false, "/api/v1//": false, "relative": false, "/a.b/c..d/.e": true,
	} {
		if got := clean(p); got != want {
			t.Errorf("clean(%q) = %v, want %v", p, got, want)
		}
	}
}

// FuzzCleanIsPathClean holds clean's shortcut to path.Clean's judgment.
func FuzzCleanIsPathClean(f *testing.F) {
	for _, p := range []string{"/", "//", "/a/", "/a//", "/.", "/..", "/a/.", "/a/..", "/.a", "/a/.b/", "/a./b", "", "a", "/a/b/../c", "///"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		c := path.Clean(p)
		want := p != "" && p[0] == '/' && (c == p || (c != "/" && c+"/" == p))
		if got := clean(p); got != want {
			t.Fatalf("clean(%q) = %v, path.Clean says %q", p, got, c)
		}
	})
}

// TestMetricsCountEachOperationAndStatus: the series looked up once per operation and status
// count every request, from concurrent requests too, under the operation's and status's labels
// ("none" for a request no operation matched).
func TestMetricsCountEachOperationAndStatus(t *testing.T) {
	m := newMetrics()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				m.observe("getHome", 200, time.Millisecond)
				m.observe("getHome", 429, time.Millisecond)
				m.observe("getOrganization", 200, time.Millisecond)
				m.observe("", 404, time.Millisecond)
			}
		})
	}
	wg.Wait()
	requests, latencies := map[string]float64{}, map[string]uint64{}
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			labels := ""
			for _, l := range s.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + " "
			}
			switch f.GetName() {
			case "renga_http_requests_total":
				requests[labels] = s.GetCounter().GetValue()
			case "renga_http_request_duration_seconds":
				latencies[labels] = s.GetHistogram().GetSampleCount()
			}
		}
	}
	wantRequests := map[string]float64{"operation=getHome status=200 ": 800, "operation=getHome status=429 ": 800,
		"operation=getOrganization status=200 ": 800, "operation=none status=404 ": 800}
	wantLatencies := map[string]uint64{"operation=getHome ": 1600, "operation=getOrganization ": 800, "operation=none ": 800}
	if !maps.Equal(requests, wantRequests) {
		t.Errorf("requests: %v, want %v", requests, wantRequests)
	}
	if !maps.Equal(latencies, wantLatencies) {
		t.Errorf("latencies: %v, want %v", latencies, wantLatencies)
	}
}
