package pipeline

import "testing"

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
