package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/cli"
	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// TestIdentityProviderRecoverLocal runs `renga identity-provider recover-local` end to end: it
// refuses to run against RENGA_URL (a bearer token never reaches it), refuses an email the
// support source does not name and a lifetime over 24h, prints the code once (stdout, alone)
// with the recovery page's URL, audits recoverLocal as the local operator without the code,
// and the code then signs its person in over real HTTP, once.
//
// Fails when: the remote check is removed (the command runs with RENGA_URL set, through
// RENGA_DATABASE_URL, and makes a recovery); when the command prints the URL without the
// recovery page's path.
func TestIdentityProviderRecoverLocal(t *testing.T) {
	t.Parallel()
	e := servertest.Start(t)
	ctx := context.Background()
	p, err := domain.Providers{}.CreateIdentityProvider(ctx, e.Pool, domain.NewProvider{Slug: "corp", Protocol: "oidc",
		Issuer: "https://id.example.com", ProviderConfig: domain.ProviderConfig{DisplayName: "Corp", ClientID: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := (domain.Providers{}).PutSupportSource(ctx, e.Pool, 1, domain.SupportSourceWrite{Enabled: true, ProviderID: &p.ID,
		AllowedEmails: []string{"alice@ops.example"}}); err != nil {
		t.Fatal(err)
	}
	remote, local := modes(t, e, e.Token(t, servertest.AllScopes()...))
	both := map[string]string{}
	for k, v := range local {
		both[k] = v
	}
	both["RENGA_URL"] = e.URL
	count := func(where string) int {
		t.Helper()
		var n int
		if err := e.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE operation = 'recoverLocal' AND `+where).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Never against RENGA_URL: with a full-scope token, or with the database too.
	for name, env := range map[string]map[string]string{"remote": remote, "RENGA_URL and RENGA_DATABASE_URL": both} {
		if r := run(t, env, "identity-provider", "recover-local", "--email", "alice@ops.example"); r.code != cli.ExitUsage ||
			!strings.Contains(r.stderr, "recover-local is a release command") || r.stdout != "" {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if r := run(t, local, "--url", e.URL, "identity-provider", "recover-local", "--email", "alice@ops.example"); r.code != cli.ExitUsage {
		t.Errorf("--url: %+v", r)
	}
	var made int
	if err := e.Pool.QueryRow(ctx, `SELECT count(*) FROM local_recoveries`).Scan(&made); err != nil || made != 0 || count("true") != 0 {
		t.Fatalf("recoveries after the remote attempts: %d %v", made, err)
	}

	// Refusals on the server host.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--email", "bob@ops.example"}, "the support source does not name bob@ops.example"},
		{[]string{"--email", "Alice <alice@ops.example>"}, "--email must be a bare email address"},
		{[]string{"--email", "alice@ops.example", "--expires-in", "25h"}, "at most 24h"},
		{[]string{"--email", "alice@ops.example", "--expires-in", "0"}, "at most 24h"},
	} {
		if r := run(t, local, append([]string{"identity-provider", "recover-local"}, c.args...)...); r.code != cli.ExitUsage ||
			!strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("%q: %+v; want exit 2 saying %q", c.args, r, c.want)
		}
	}

	// The code alone on stdout; the URL and the expiry on stderr.
	text := run(t, local, "identity-provider", "recover-local", "--email", "Alice@ops.example")
	first := strings.TrimSuffix(text.stdout, "\n")
	e.Track(first)
	if text.code != 0 || !strings.HasPrefix(first, domain.LocalRecoveryCodePrefix) || strings.Contains(first, "\n") ||
		!strings.Contains(text.stderr, e.Config.PublicURL+"/signin/recover") || !strings.Contains(text.stderr, "alice@ops.example") ||
		strings.Contains(text.stderr, first) {
		t.Fatalf("recover-local: %+v", text)
	}
	// JSON: the same, and it revokes the first (one open recovery per email).
	js := run(t, local, "-o", "json", "identity-provider", "recover-local", "--email", "alice@ops.example", "--expires-in", "30m")
	var out struct {
		ID, Email, URL, Code string
		ExpiresAt            time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal([]byte(js.stdout), &out); err != nil {
		t.Fatalf("json: %+v", js)
	}
	e.Track(out.Code)
	if js.code != 0 || !strings.HasPrefix(out.ID, "rcv_") || out.Email != "alice@ops.example" || out.URL != e.Config.PublicURL+server.SignInRecoverPath ||
		!strings.HasPrefix(out.Code, domain.LocalRecoveryCodePrefix) || time.Until(out.ExpiresAt) < 29*time.Minute || time.Until(out.ExpiresAt) > 31*time.Minute {
		t.Fatalf("recover-local -o json: %+v", js)
	}

	// Audited as the local operator with the invocation, the failures too; never the code
	// (servertest scans the audit, the logs and the tables for it when the test ends).
	if n := count(`outcome = 'succeeded' AND actor_type = 'local_operator' AND actor_id = 'local-operator' AND invocation_id IS NOT NULL
		AND changed_fields = '{local_recovery}' AND source_address = 'local'`); n != 2 {
		t.Errorf("succeeded recoverLocal events: %d; want 2", n)
	}
	if n := count(`outcome = 'failed' AND actor_type = 'local_operator'`); n != 2 {
		t.Errorf("failed recoverLocal events: %d; want 2 (the unnamed email, the bad email)", n)
	}
	// For whom, through the API (the actor is the local operator): the email, when the email
	// given was an email address.
	listed := run(t, remote, "-o", "json", "audit", "list", "--operation", "recoverLocal")
	var events struct {
		Items []struct {
			Outcome string
			Targets struct{ Email *string }
		}
	}
	if err := json.Unmarshal([]byte(listed.stdout), &events); err != nil || listed.code != 0 {
		t.Fatalf("audit list: %+v %v", listed, err)
	}
	var whom []string
	for _, ev := range events.Items {
		email := "<none>"
		if ev.Targets.Email != nil {
			email = *ev.Targets.Email
		}
		whom = append(whom, ev.Outcome+" "+email)
	}
	slices.Sort(whom) // events of one millisecond list in either order
	if want := []string{"failed <none>", "failed bob@ops.example", "succeeded alice@ops.example", "succeeded alice@ops.example"}; !slices.Equal(whom, want) {
		t.Errorf("recoverLocal events' target emails: %q, want %q", whom, want)
	}
	// The table shows it as the event's target (its TARGET column).
	if table := run(t, remote, "audit", "list", "--operation", "recoverLocal"); table.code != 0 ||
		strings.Count(table.stdout, "\talice@ops.example\t") != 2 || !strings.Contains(table.stdout, "\tbob@ops.example\t") {
		t.Errorf("audit list: %+v", table)
	}

	// The code signs alice in over HTTP, once; the first code was revoked by the second.
	signIn := func(code string) (int, string) {
		t.Helper()
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		page := strings.Replace(out.URL, e.Config.PublicURL, e.URL, 1)
		resp, err := c.Get(page)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("recovery page: %d %s", resp.StatusCode, body)
		}
		for _, ck := range jar.Cookies(resp.Request.URL) {
			e.Track(ck.Value)
		}
		r, _ := http.NewRequest(http.MethodPost, page, strings.NewReader(url.Values{"csrf": {string(m[1])}, "email": {"alice@ops.example"},
			"code": {code}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err = c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		for _, ck := range jar.Cookies(resp.Request.URL) {
			e.Track(ck.Value)
		}
		resp, err = c.Get(e.URL + "/signin")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	if _, body := signIn(first); strings.Contains(body, "signed in as") {
		t.Errorf("the revoked first code signed in: %s", body)
	}
	if _, body := signIn(out.Code); !strings.Contains(body, "signed in as <strong><bdi>alice@ops.example</bdi></strong> with <bdi>local recovery</bdi>") {
		t.Errorf("the code did not sign alice in: %s", body)
	}
	if _, body := signIn(out.Code); strings.Contains(body, "signed in as") {
		t.Errorf("the code signed in twice: %s", body)
	}
}
