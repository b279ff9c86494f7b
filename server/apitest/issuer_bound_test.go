package apitest

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"renga.dev/renga/server/servertest"
)

// TestIssuerAnswersAreBounded (issue 58): an issuer's answers are compressed input the server
// reads (net/http decodes gzip for it): a provider whose issuer answers discovery with a small
// gzip stream of 1 GiB is refused as unreachable, and the server's peak RSS grows by under
// 64 MiB. Not parallel: the peak is the process's.
func TestIssuerAnswersAreBounded(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the peak RSS is read from Linux's /proc/self/status")
	}
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		defer gz.Close()
		_, _ = io.WriteString(gz, `{"issuer": "`)
		run := bytes.Repeat([]byte("a"), 64<<10)
		for range (1 << 30) / len(run) {
			if _, err := gz.Write(run); err != nil {
				return // the server stopped reading
			}
		}
		_, _ = io.WriteString(gz, `"}`)
	}))
	t.Cleanup(hostile.Close)
	env := servertest.Start(t)
	token := env.Token(t, "providers:write", "support:write")
	p, _ := createProvider(t, env, token, map[string]any{"slug": "hostile", "protocol": "oidc", "issuer": hostile.URL,
		"display_name": "Hostile", "client_id": "c", "client_secret": map[string]string{"value": "s"},
		"allowed_email_domains": []string{"example.com"}})
	testURL, _ := startTest(t, env, token, p.ID)
	var got page
	grew := peakGrowth(t, func() { got = newBrowser(t, env).get(t, testURL) })
	if got.Status != http.StatusServiceUnavailable || !strings.Contains(got.Body, "cannot be reached") {
		t.Errorf("a test of the provider: %d %s, want 503, the provider cannot be reached", got.Status, got.Body)
	}
	if grew >= 64<<20 {
		t.Errorf("the peak RSS grew by %d MiB, want under 64", grew>>20)
	}
	t.Logf("peak RSS grew by %.1f MiB", float64(grew)/(1<<20))
}
