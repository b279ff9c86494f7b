package apitest

import (
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"renga.dev/renga/server/servertest"
)

// TestAcceptPage: the page invitation mails link to exists, posts to the acceptance API, and
// its Content-Security-Policy allows exactly its own script.
func TestAcceptPage(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	resp, err := http.Get(env.URL + "/invitations/accept")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(page, `fetch("/api/v1/invitations/accept"`) || !strings.Contains(page, `location.hash`) {
		t.Fatalf("accept page: %d %s", resp.StatusCode, page)
	}
	script := regexp.MustCompile(`(?s)<script>(.*?)</script>`).FindStringSubmatch(page)
	if script == nil {
		t.Fatal("no script")
	}
	sum := sha256.Sum256([]byte(script[1]))
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'") {
		t.Errorf("the CSP does not allow the page's script: %s", csp)
	}
	if resp.Header.Get("Referrer-Policy") != "no-referrer" {
		t.Error("the page could leak its address (with the token) in a Referer")
	}
}
