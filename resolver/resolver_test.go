package resolver_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"renga.dev/renga/resolver"
)

func writeMap(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, url string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func TestResolverAnswersFromItsMap(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "resolver.yaml")
	writeMap(t, path, "deployments:\n  eu1: https://eu1.renga.example.com/\n  us: https://us.renga.example.com\n")
	m, err := resolver.LoadMap(path)
	if err != nil {
		t.Fatal(err)
	}
	r := resolver.New(m, 0, 1, slog.New(slog.DiscardHandler))
	ts := httptest.NewServer(r)
	defer ts.Close()

	status, h, body := get(t, ts.URL+"/api/v1/agent/home?deployment=eu1")
	var home map[string]string
	if status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "application/json") || json.Unmarshal(body, &home) != nil ||
		len(home) != 1 || home["home"] != "https://eu1.renga.example.com" {
		t.Errorf("eu1: %d %s", status, body)
	}
	for _, q := range []string{"?deployment=", "", "?deployment=nowhere", "?deployment=EU1"} {
		status, h, body := get(t, ts.URL+"/api/v1/agent/home"+q)
		var p struct {
			Error  string `json:"error"`
			Status int    `json:"status"`
		}
		if status != 404 || h.Get("Content-Type") != "application/problem+json" || json.Unmarshal(body, &p) != nil || p.Error != "not_found" || p.Status != 404 {
			t.Errorf("%q: %d %s %s", q, status, h.Get("Content-Type"), body)
		}
	}
	if status, _, _ := get(t, ts.URL+"/api/v1/agent/installations"); status != 404 {
		t.Errorf("another path: %d", status)
	}
	resp, err := http.Post(ts.URL+"/api/v1/agent/home?deployment=eu1", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 {
		t.Errorf("POST: %d", resp.StatusCode)
	}

	// Reloading: a bad map keeps the old one and says why; a good one replaces it.
	for _, bad := range []string{
		"deployments:\n  eu1: not a url\n",
		"deployments:\n  EU1: https://x.example.com\n",
		"deployments:\n  eu1: https://x.example.com?q=1\n",
		"deployment:\n  eu1: https://x.example.com\n",
		"deployments: [\n",
		"",
	} {
		writeMap(t, path, bad)
		if err := r.Reload(path); err == nil {
			t.Errorf("%q reloaded", bad)
		}
		if status, _, _ := get(t, ts.URL+"/api/v1/agent/home?deployment=eu1"); status != 200 {
			t.Errorf("after the bad map %q, eu1 answers %d", bad, status)
		}
	}
	writeMap(t, path, "deployments:\n  eu1: https://eu2.renga.example.com\n")
	if err := r.Reload(path); err != nil {
		t.Fatal(err)
	}
	if _, _, body := get(t, ts.URL+"/api/v1/agent/home?deployment=eu1"); !strings.Contains(string(body), "https://eu2.renga.example.com") {
		t.Errorf("after reload: %s", body)
	}
	if status, _, _ := get(t, ts.URL+"/api/v1/agent/home?deployment=us"); status != 404 {
		t.Errorf("us after reload: %d", status)
	}
}

func TestResolverRateLimitsPerAddress(t *testing.T) {
	t.Parallel()
	r := resolver.New(resolver.Map{"eu1": "https://eu1.example.com"}, 1, 3, slog.New(slog.DiscardHandler))
	ts := httptest.NewServer(r)
	defer ts.Close()
	var codes []int
	for range 5 {
		status, h, _ := get(t, ts.URL+"/api/v1/agent/home?deployment=eu1")
		codes = append(codes, status)
		if status == 429 && h.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
	}
	if codes[0] != 200 || codes[2] != 200 || codes[3] != 429 || codes[4] != 429 {
		t.Errorf("codes %v, want 3 × 200 then 429", codes)
	}
	// Another address has its own budget.
	req := httptest.NewRequest(http.MethodGet, "/api/v1/agent/home?deployment=eu1", nil)
	req.RemoteAddr = "192.0.2.7:1234"
	w := httptest.NewRecorder()
	r.ServeHTTP(w, req)
	if w.Code != 200 {
		t.Errorf("another address: %d", w.Code)
	}
}
