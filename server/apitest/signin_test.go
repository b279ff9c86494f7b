package apitest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/oidctest"
	"renga.dev/renga/server/servertest"
)

// Deployment sign-in and provider tests, end to end: a real server, a real OpenID Provider
// (server/oidctest, zitadel/oidc's pkg/op with its own RSA key), real HTTP. A browser here is
// a cookie jar that does not follow redirects, so each hop is checked.

var (
	alice   = oidctest.User{Username: "alice", Email: "alice@example.com", EmailVerified: true, Name: "Alice Support"}
	bob     = oidctest.User{Username: "bob", Email: "bob@elsewhere.example", EmailVerified: true}
	unsure  = oidctest.User{Username: "unsure", Email: "unsure@example.com", EmailVerified: false}
	callers = []oidctest.User{alice, bob, unsure}
)

// startOP runs a provider whose client accepts the deployment's callback.
func startOP(t testing.TB, env *servertest.Env) *oidctest.Provider {
	t.Helper()
	op := oidctest.Start(t, []string{env.Config.PublicURL + "/signin/callback"}, callers...)
	env.Track(op.ClientSecret)
	return op
}

// storeProvider stores a provider for op (revision 1 pending).
func storeProvider(t testing.TB, env *servertest.Env, token string, op *oidctest.Provider, slug string) identityProvider {
	t.Helper()
	body := map[string]any{"slug": slug, "protocol": "oidc", "issuer": op.Issuer, "display_name": "Provider " + slug,
		"client_id": op.ClientID, "client_secret": map[string]string{"value": op.ClientSecret},
		"allowed_email_domains": []string{"example.com"}}
	p, _ := createProvider(t, env, token, body)
	return p
}

type providerTest struct {
	TestURL   *string   `json:"test_url"`
	Revision  int64     `json:"revision"`
	ExpiresAt time.Time `json:"expires_at"`
}

// startTest starts a test of the provider's pending revision and returns its URL (tracked as
// a secret: it must appear nowhere but in this response).
func startTest(t testing.TB, env *servertest.Env, token, id string) (string, providerTest) {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodPost, Path: providersPath + "/" + id + "/tests", Token: token,
		Header: headers("Idempotency-Key", newKey())})
	if rep.Status != http.StatusCreated {
		t.Fatalf("start test: %d %s", rep.Status, rep.Body)
	}
	var pt providerTest
	rep.decode(t, &pt)
	if pt.TestURL == nil || !strings.HasPrefix(*pt.TestURL, env.Config.PublicURL+"/signin/test?capability=") {
		t.Fatalf("test_url = %v", pt.TestURL)
	}
	env.Track(capabilityOf(t, *pt.TestURL))
	return *pt.TestURL, pt
}

func capabilityOf(t testing.TB, testURL string) string {
	t.Helper()
	u, err := url.Parse(testURL)
	if err != nil || u.Query().Get("capability") == "" {
		t.Fatalf("test URL %q has no capability", testURL)
	}
	return u.Query().Get("capability")
}

type browser struct {
	env *servertest.Env
	c   *http.Client
}

func newBrowser(t testing.TB, env *servertest.Env) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{env: env, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	Status   int
	Header   http.Header
	Body     string
	Location string
}

// local is a deployment URL (its public URL) on the test server.
func (b *browser) local(u string) string {
	if rest, ok := strings.CutPrefix(u, b.env.Config.PublicURL); ok {
		return b.env.URL + rest
	}
	if strings.HasPrefix(u, "/") {
		return b.env.URL + u
	}
	return u
}

func (b *browser) do(t testing.TB, r *http.Request) page {
	t.Helper()
	resp, err := b.c.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return page{Status: resp.StatusCode, Header: resp.Header, Body: string(body), Location: resp.Header.Get("Location")}
}

func (b *browser) get(t testing.TB, u string) page {
	t.Helper()
	r, err := http.NewRequest(http.MethodGet, b.local(u), nil)
	if err != nil {
		t.Fatal(err)
	}
	return b.do(t, r)
}

func (b *browser) post(t testing.TB, u string, form url.Values, h http.Header) page {
	t.Helper()
	r, err := http.NewRequest(http.MethodPost, b.local(u), strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range h {
		r.Header[k] = v
	}
	return b.do(t, r)
}

// toProvider opens start (a sign-in or test URL) and returns where the deployment sends the
// browser: the provider's authorization endpoint.
func (b *browser) toProvider(t testing.TB, op *oidctest.Provider, start string) string {
	t.Helper()
	p := b.get(t, start)
	if p.Status != http.StatusSeeOther || !strings.HasPrefix(p.Location, op.Issuer+"/") {
		t.Fatalf("GET %s: %d to %q (%s); want 303 to the provider", start, p.Status, p.Location, p.Body)
	}
	for _, c := range b.c.Jar.Cookies(mustURL(t, b.env.URL)) {
		b.env.Track(c.Value) // the flow cookie: a secret of this browser
	}
	return p.Location
}

// atProvider signs in at the provider as username and returns the redirect back (the
// callback URL with code and state); the code is tracked as a secret.
func atProvider(t testing.TB, env *servertest.Env, op *oidctest.Provider, authorize, username string) *url.URL {
	t.Helper()
	back, err := op.SignIn(authorize, username)
	if err != nil {
		t.Fatal(err)
	}
	if code := back.Query().Get("code"); code != "" {
		env.Track(code)
	}
	return back
}

// through drives a whole trip: start, the provider as username, and the callback.
func (b *browser) through(t testing.TB, op *oidctest.Provider, start, username string) page {
	t.Helper()
	back := atProvider(t, b.env, op, b.toProvider(t, op, start), username)
	return b.get(t, back.String())
}

// activateByTest makes a provider's pending revision active the only way there is: a test.
func activateByTest(t testing.TB, env *servertest.Env, token string, op *oidctest.Provider, id string) {
	t.Helper()
	testURL, _ := startTest(t, env, token, id)
	if p := newBrowser(t, env).through(t, op, testURL, "alice"); p.Status != http.StatusOK || !strings.Contains(p.Body, `id="activated"`) {
		t.Fatalf("test of %s: %d %s", id, p.Status, p.Body)
	}
}

type activationEvent struct {
	Actor struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name_snapshot"`
	} `json:"actor"`
	Operation string   `json:"operation"`
	Outcome   string   `json:"outcome"`
	Status    int      `json:"status"`
	Error     *string  `json:"error"`
	Changed   []string `json:"changed_fields"`
	Targets   struct {
		ProviderID *string `json:"provider_id"`
	} `json:"targets"`
}

func activationAudit(t testing.TB, env *servertest.Env, token string) []activationEvent {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/audit-events?operation=activateIdentityProvider", Token: token})
	var list struct {
		Items []activationEvent `json:"items"`
	}
	rep.decode(t, &list)
	return list.Items
}

// TestProviderTestActivatesTheRevision: a test URL signs a person in at the provider and
// activates exactly the revision it was started for; the URL works once; a replay of the
// request that started it carries no URL; the activation is audited by the token that
// started it; a disabled provider is enabled by a successful test.
func TestProviderTestActivatesTheRevision(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	op := startOP(t, env)
	token := env.Token(t, "providers:write", "audit:read")
	p := storeProvider(t, env, token, op, "corp")

	if rep := send(t, env, req{Method: http.MethodPost, Path: providersPath + "/" + p.ID + "/tests", Token: token}); rep.Status != http.StatusBadRequest ||
		rep.problem(t).Error != "idempotency_key_required" {
		t.Errorf("start a test without Idempotency-Key: %d %s", rep.Status, rep.Body)
	}
	key := newKey()
	rep := send(t, env, req{Method: http.MethodPost, Path: providersPath + "/" + p.ID + "/tests", Token: token, Header: headers("Idempotency-Key", key)})
	var pt providerTest
	rep.decode(t, &pt)
	if rep.Status != http.StatusCreated || pt.TestURL == nil || pt.Revision != 1 || time.Until(pt.ExpiresAt) > 11*time.Minute || time.Until(pt.ExpiresAt) < 9*time.Minute {
		t.Fatalf("start test: %d %s", rep.Status, rep.Body)
	}
	testURL := *pt.TestURL
	env.Track(capabilityOf(t, testURL))
	replay := send(t, env, req{Method: http.MethodPost, Path: providersPath + "/" + p.ID + "/tests", Token: token, Header: headers("Idempotency-Key", key)})
	if replay.Status != http.StatusCreated || replay.Header.Get("Idempotent-Replayed") != "true" || strings.Contains(string(replay.Body), "test_url") {
		t.Errorf("replay of the test's start: %d %s %v", replay.Status, replay.Body, replay.Header)
	}

	// Not active until the test completes.
	if got, _ := getProvider(t, env, token, p.ID); got.ActiveRevision != nil {
		t.Fatalf("active before the test: %+v", got)
	}
	b := newBrowser(t, env)
	authorize := b.toProvider(t, op, testURL)
	au, _ := url.Parse(authorize)
	if q := au.Query(); q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" ||
		q.Get("redirect_uri") != env.Config.PublicURL+"/signin/callback" || q.Get("client_id") != op.ClientID {
		t.Errorf("authorization request: %s", au.RawQuery)
	}
	// The URL is spent once opened.
	if again := newBrowser(t, env).get(t, testURL); again.Status != http.StatusForbidden || !strings.Contains(again.Body, "already used") {
		t.Errorf("test URL opened twice: %d %s", again.Status, again.Body)
	}
	done := b.get(t, atProvider(t, env, op, authorize, "alice").String())
	if done.Status != http.StatusOK || !strings.Contains(done.Body, `id="activated"`) || !strings.Contains(done.Body, "revision 1") {
		t.Fatalf("callback: %d %s", done.Status, done.Body)
	}
	if csp := done.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Errorf("CSP = %q", csp)
	}
	got, rep := getProvider(t, env, token, p.ID)
	if got.ActiveRevision == nil || *got.ActiveRevision != 1 || got.PendingRevision != nil || got.State != "enabled" || rep.Header.Get("ETag") != `"2"` {
		t.Errorf("after the test: %+v (ETag %s)", got, rep.Header.Get("ETag"))
	}
	tokenID := send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/tokens/self", Token: token})
	var self struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	tokenID.decode(t, &self)
	events := activationAudit(t, env, token)
	// The actor's name snapshot too (fails when the token's name is left out of the event).
	if len(events) != 1 || events[0].Outcome != "succeeded" || events[0].Actor.Type != "operator_token" || events[0].Actor.ID != self.ID ||
		self.Name == "" || events[0].Actor.Name != self.Name ||
		events[0].Targets.ProviderID == nil || *events[0].Targets.ProviderID != p.ID || strings.Join(events[0].Changed, ",") != "active_revision,pending_revision" {
		t.Errorf("activation audit = %+v", events)
	}

	// Nothing pending now: 409 no_pending_revision.
	rep = send(t, env, req{Method: http.MethodPost, Path: providersPath + "/" + p.ID + "/tests", Token: token, Header: headers("Idempotency-Key", newKey())})
	if rep.Status != http.StatusConflict || rep.problem(t).Error != "no_pending_revision" {
		t.Errorf("test with no pending revision: %d %s", rep.Status, rep.Body)
	}

	// A disabled provider (another one keeps the deployment usable) is enabled by its test.
	op2 := startOP(t, env)
	other := storeProvider(t, env, token, op2, "other")
	activateByTest(t, env, token, op2, other.ID)
	if rep := send(t, env, req{Method: http.MethodPost, Path: providersPath + "/" + p.ID + "/disable", Token: token}); rep.Status != http.StatusOK {
		t.Fatalf("disable: %d %s", rep.Status, rep.Body)
	}
	_, rep = getProvider(t, env, token, p.ID)
	var doc map[string]any
	rep.decode(t, &doc)
	doc["display_name"] = "Corp, again"
	if out, _ := putProvider(env, token, p.ID, rep.Header.Get("ETag"), jsonBody(doc)); out.Status != http.StatusOK {
		t.Fatalf("PUT: %d %s", out.Status, out.Body)
	}
	activateByTest(t, env, token, op, p.ID)
	if got, _ := getProvider(t, env, token, p.ID); got.State != "enabled" || got.ActiveRevision == nil || *got.ActiveRevision != 2 {
		t.Errorf("a disabled provider after its test: %+v", got)
	}
	if events := activationAudit(t, env, token); len(events) != 3 || strings.Join(events[0].Changed, ",") != "active_revision,pending_revision,state" {
		t.Errorf("audit of the activation that enabled: %+v", events)
	}
}

// TestProviderTestOfASupersededRevisionFails: a test started for revision 1 fails once a PUT
// made revision 2 pending, and changes nothing (opened after the PUT, it is refused at once);
// a test racing a PUT serializes with it; of two tests of one revision completed at once,
// exactly one activates it.
func TestProviderTestOfASupersededRevisionFails(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	op := startOP(t, env)
	token := env.Token(t, "providers:write", "audit:read")
	p := storeProvider(t, env, token, op, "corp")
	first, _ := startTest(t, env, token, p.ID)
	late, _ := startTest(t, env, token, p.ID)
	b := newBrowser(t, env)
	authorize := b.toProvider(t, op, first)

	_, rep := getProvider(t, env, token, p.ID)
	var doc map[string]any
	rep.decode(t, &doc)
	doc["display_name"] = "Corp v2"
	if out, _ := putProvider(env, token, p.ID, rep.Header.Get("ETag"), jsonBody(doc)); out.Status != http.StatusOK {
		t.Fatalf("PUT: %d %s", out.Status, out.Body)
	}
	// Opened after the PUT: refused at once, nobody is sent to the provider.
	requests := op.Requests()
	if pg := newBrowser(t, env).get(t, late); pg.Status != http.StatusForbidden || !strings.Contains(pg.Body, "no longer the provider&#39;s pending revision") ||
		op.Requests() != requests {
		t.Errorf("test URL of a superseded revision opened: %d %s", pg.Status, pg.Body)
	}
	// Opened before the PUT, completed after it: fails, nothing activated.
	done := b.get(t, atProvider(t, env, op, authorize, "alice").String())
	if done.Status != http.StatusForbidden || !strings.Contains(done.Body, "no longer the provider&#39;s pending revision") {
		t.Fatalf("test of a superseded revision: %d %s", done.Status, done.Body)
	}
	got, _ := getProvider(t, env, token, p.ID)
	if got.ActiveRevision != nil || got.PendingRevision == nil || *got.PendingRevision != 2 || got.Version != 2 {
		t.Errorf("after the failed test: %+v", got)
	}
	// Its audit event names why: the revision is no longer pending. (Fails when the code is
	// left out, as it was.)
	if events := activationAudit(t, env, token); len(events) != 1 || events[0].Outcome != "failed" || events[0].Status != http.StatusForbidden ||
		events[0].Error == nil || *events[0].Error != "no_pending_revision" {
		t.Errorf("audit of the failed test: %+v", events)
	}

	// A test's callback racing a PUT made from the same read: the activation changes the
	// version, so either the test activates revision 2 and the PUT is 412, or the PUT makes
	// revision 3 pending first and the test fails.
	raceURL, _ := startTest(t, env, token, p.ID)
	rb := newBrowser(t, env)
	raceBack := atProvider(t, env, op, rb.toProvider(t, op, raceURL), "alice").String()
	_, rep = getProvider(t, env, token, p.ID)
	rep.decode(t, &doc)
	doc["display_name"] = "Corp v3"
	var racePage page
	var racePut reply
	var wg sync.WaitGroup
	wg.Go(func() { racePage = rb.get(t, raceBack) })
	wg.Go(func() { racePut, _ = putProvider(env, token, p.ID, rep.Header.Get("ETag"), jsonBody(doc)) })
	wg.Wait()
	got, _ = getProvider(t, env, token, p.ID)
	switch {
	case racePage.Status == http.StatusOK && racePut.Status == http.StatusPreconditionFailed &&
		got.ActiveRevision != nil && *got.ActiveRevision == 2 && got.PendingRevision == nil:
	case racePage.Status == http.StatusForbidden && racePut.Status == http.StatusOK &&
		got.ActiveRevision == nil && got.PendingRevision != nil && *got.PendingRevision == 3:
	default:
		t.Fatalf("test racing a PUT: callback %d, PUT %d, provider %+v", racePage.Status, racePut.Status, got)
	}
	_, rep = getProvider(t, env, token, p.ID)
	rep.decode(t, &doc)
	doc["display_name"] = "Corp v4"
	if out, _ := putProvider(env, token, p.ID, rep.Header.Get("ETag"), jsonBody(doc)); out.Status != http.StatusOK {
		t.Fatalf("PUT: %d %s", out.Status, out.Body)
	}
	got, _ = getProvider(t, env, token, p.ID)
	pending := *got.PendingRevision

	// Two tests of the pending revision, their callbacks at once: one activates, the other fails.
	backs := make([]string, 2)
	browsers := make([]*browser, 2)
	for i := range backs {
		u, _ := startTest(t, env, token, p.ID)
		browsers[i] = newBrowser(t, env)
		backs[i] = atProvider(t, env, op, browsers[i].toProvider(t, op, u), "alice").String()
	}
	results := make([]page, 2)
	for i := range backs {
		wg.Go(func() { results[i] = browsers[i].get(t, backs[i]) })
	}
	wg.Wait()
	if got := results[0].Status + results[1].Status; got != http.StatusOK+http.StatusForbidden || results[0].Status == results[1].Status {
		t.Fatalf("two concurrent activations: %d and %d; want one 200 and one 403", results[0].Status, results[1].Status)
	}
	got, _ = getProvider(t, env, token, p.ID)
	if got.ActiveRevision == nil || *got.ActiveRevision != pending || got.PendingRevision != nil {
		t.Errorf("after the concurrent tests of revision %d: %+v", pending, got)
	}
}

// signInProvider is a provider made active by its test, for sign-in, and the support
// source naming its people of example.com (sign-in is for support people only).
func signInProvider(t testing.TB, env *servertest.Env, op *oidctest.Provider, slug string) identityProvider {
	t.Helper()
	token := env.Token(t, "providers:write", "support:write")
	p := storeProvider(t, env, token, op, slug)
	activateByTest(t, env, token, op, p.ID)
	putSupportSource(t, env, token, map[string]any{"enabled": true, "provider_id": p.ID, "allowed_email_domain": "example.com"})
	return p
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// TestSignInSessionAndSignOut: signing in makes a session cookie (HttpOnly, SameSite=Lax; in
// development over http without __Host- and Secure) that shows who is signed in; signing out
// needs the page's CSRF token and revokes the session.
func TestSignInSessionAndSignOut(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	op := startOP(t, env)
	p := signInProvider(t, env, op, "corp")

	b := newBrowser(t, env)
	list := b.get(t, "/signin")
	if list.Status != http.StatusOK || !strings.Contains(list.Body, `href="/signin?provider=corp"`) {
		t.Fatalf("sign-in page: %d %s", list.Status, list.Body)
	}
	done := b.through(t, op, "/signin?provider=corp", "alice")
	if done.Status != http.StatusSeeOther || done.Location != "/signin" {
		t.Fatalf("callback: %d %q %s", done.Status, done.Location, done.Body)
	}
	var session *http.Cookie
	for _, c := range (&http.Response{Header: done.Header}).Cookies() {
		if c.Name == server.SessionCookie && c.Value != "" {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Path != "/" || session.Secure ||
		session.MaxAge < 7*3600 {
		t.Fatalf("session cookie: %+v (Set-Cookie %v)", session, done.Header.Values("Set-Cookie"))
	}
	env.Track(session.Value)
	who := b.get(t, "/signin")
	if who.Status != http.StatusOK || !strings.Contains(who.Body, "signed in as <strong><bdi>alice@example.com</bdi></strong> (<bdi>Alice Support</bdi>) with <bdi>Provider corp</bdi>") {
		t.Fatalf("signed-in page: %d %s", who.Status, who.Body)
	}
	var stored int
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM deployment_sessions WHERE email = 'alice@example.com' AND revoked_at IS NULL`).Scan(&stored); err != nil || stored != 1 {
		t.Fatalf("sessions stored: %d %v", stored, err)
	}
	csrf := csrfField.FindStringSubmatch(who.Body)
	if csrf == nil {
		t.Fatalf("no CSRF token in %s", who.Body)
	}

	// Sign-out without the token, with another's, or from another origin: refused. The other
	// token differs from the right one in its first character (whatever that is).
	wrong := "x" + csrf[1][1:]
	if csrf[1][0] == 'x' {
		wrong = "y" + csrf[1][1:]
	}
	for name, c := range map[string]struct {
		form   url.Values
		header http.Header
	}{
		"no token":     {url.Values{}, nil},
		"wrong token":  {url.Values{"csrf": {wrong}}, nil},
		"cross origin": {url.Values{"csrf": {csrf[1]}}, http.Header{"Origin": {"https://evil.example"}}},
	} {
		if p := b.post(t, "/signout", c.form, c.header); p.Status != http.StatusForbidden {
			t.Errorf("sign-out with %s: %d %s", name, p.Status, p.Body)
		}
	}
	if p := b.get(t, "/signin"); !strings.Contains(p.Body, "alice@example.com") {
		t.Fatalf("a refused sign-out signed out: %s", p.Body)
	}
	out := b.post(t, "/signout", url.Values{"csrf": {csrf[1]}}, http.Header{"Origin": {"http://renga.test"}})
	if out.Status != http.StatusSeeOther || out.Location != "/signin" {
		t.Fatalf("sign-out: %d %s", out.Status, out.Body)
	}
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM deployment_sessions WHERE revoked_at IS NOT NULL`).Scan(&stored); err != nil || stored != 1 {
		t.Fatalf("revoked sessions: %d %v", stored, err)
	}
	// The old cookie value no longer signs anyone in, even sent again by hand.
	replayed := newBrowser(t, env)
	r, _ := http.NewRequest(http.MethodGet, env.URL+"/signin", nil)
	r.AddCookie(&http.Cookie{Name: server.SessionCookie, Value: session.Value})
	if p := replayed.do(t, r); p.Status != http.StatusOK || strings.Contains(p.Body, "alice@example.com") || !strings.Contains(p.Body, "provider=corp") {
		t.Errorf("a revoked session's cookie: %d %s", p.Status, p.Body)
	}

	// A session ends when its provider stops serving sign-in.
	if p := b.through(t, op, "/signin?provider=corp", "alice"); p.Status != http.StatusSeeOther {
		t.Fatalf("sign in again: %d %s", p.Status, p.Body)
	}
	for _, c := range b.c.Jar.Cookies(mustURL(t, env.URL)) {
		env.Track(c.Value)
	}
	if p := b.get(t, "/signin"); !strings.Contains(p.Body, "alice@example.com") {
		t.Fatalf("signed in again: %s", p.Body)
	}
	// Signing in once more in the same browser replaces its session.
	if p := b.through(t, op, "/signin?provider=corp", "alice"); p.Status != http.StatusSeeOther {
		t.Fatalf("sign in once more: %d %s", p.Status, p.Body)
	}
	for _, c := range b.c.Jar.Cookies(mustURL(t, env.URL)) {
		env.Track(c.Value)
	}
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM deployment_sessions WHERE revoked_at IS NULL`).Scan(&stored); err != nil || stored != 1 {
		t.Errorf("live sessions after signing in twice in one browser: %d %v; want 1", stored, err)
	}
	token := env.Token(t, "providers:write")
	spare := startOP(t, env)
	activateByTest(t, env, token, spare, storeProvider(t, env, token, spare, "spare").ID)
	if rep := send(t, env, req{Method: http.MethodPost, Path: providersPath + "/" + p.ID + "/disable", Token: token}); rep.Status != http.StatusOK {
		t.Fatalf("disable: %d %s", rep.Status, rep.Body)
	}
	if p := b.get(t, "/signin"); strings.Contains(p.Body, "alice@example.com") || !strings.Contains(p.Body, "provider=spare") {
		t.Errorf("a session of a disabled provider: %s", p.Body)
	}
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM deployment_sessions WHERE revoked_at IS NULL`).Scan(&stored); err != nil || stored != 0 {
		t.Errorf("live sessions after the provider was disabled: %d %v", stored, err)
	}
}

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestSignInRefusals: a forged state, a callback in a browser that did not start the sign-in,
// a nonce that is not the sign-in's, an email outside the allowed domains or not verified, and
// an unknown provider are all refused, and none makes a session.
func TestSignInRefusals(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	op := startOP(t, env)
	signInProvider(t, env, op, "corp")
	expectRefused := func(name string, p page, want string) {
		t.Helper()
		if p.Status != http.StatusForbidden || !strings.Contains(p.Body, want) {
			t.Errorf("%s: %d %s; want 403 saying %q", name, p.Status, p.Body, want)
		}
		for _, c := range p.Header.Values("Set-Cookie") {
			if strings.HasPrefix(c, server.SessionCookie+"=") && !strings.HasPrefix(c, server.SessionCookie+"=;") {
				t.Errorf("%s set a session cookie: %s", name, c)
			}
		}
	}

	// The state altered.
	b := newBrowser(t, env)
	back := atProvider(t, env, op, b.toProvider(t, op, "/signin?provider=corp"), "alice")
	q := back.Query()
	q.Set("state", "forged-"+q.Get("state"))
	forged := *back
	forged.RawQuery = q.Encode()
	expectRefused("forged state", b.get(t, forged.String()), "not one this browser started")

	// The right callback, in another browser (no flow cookie), then in one with its own flow.
	back = atProvider(t, env, op, b.toProvider(t, op, "/signin?provider=corp"), "alice")
	expectRefused("another browser", newBrowser(t, env).get(t, back.String()), "started no sign-in")
	other := newBrowser(t, env)
	other.toProvider(t, op, "/signin?provider=corp")
	expectRefused("another browser's flow", other.get(t, back.String()), "not one this browser started")
	// The flow was not spent by those: its own browser completes it, once.
	if p := b.get(t, back.String()); p.Status != http.StatusSeeOther {
		t.Errorf("the right browser after the refusals: %d %s", p.Status, p.Body)
	}
	b.toProvider(t, op, "/signin?provider=corp") // a fresh flow cookie, not the one back was for
	expectRefused("a callback replayed", b.get(t, back.String()), "not one this browser started")

	// A provider that puts another nonce in its ID token.
	op.IssueNonce("a-nonce-of-another-sign-in")
	expectRefused("wrong nonce", newBrowser(t, env).through(t, op, "/signin?provider=corp", "alice"), "nonce")
	op.IssueNonce("")

	expectRefused("email domain", newBrowser(t, env).through(t, op, "/signin?provider=corp", "bob"), "not in a domain this identity provider allows")
	expectRefused("unverified email", newBrowser(t, env).through(t, op, "/signin?provider=corp", "unsure"), "verified email")
	expectRefused("unknown provider", newBrowser(t, env).get(t, "/signin?provider=nobody"), "No identity provider")

	var n int
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM deployment_sessions`).Scan(&n); err != nil || n != 1 {
		t.Errorf("sessions: %d %v; want only the one the right browser made", n, err)
	}

	// Every refusal after the provider's callback is audited, with the email the verified token
	// names (none when the token did not verify). Refusals before it (no flow: a forged state,
	// another browser) name no provider or person and are not.
	// Fails when: only the support source's refusal is audited (as it was).
	rows, err := env.Pool.Query(context.Background(), `SELECT actor_id, actor_name, outcome, status, coalesce(error, '')
		FROM audit_events WHERE operation = 'signIn' ORDER BY time, id`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var actor, name, outcome, code string
		var status int
		if err := rows.Scan(&actor, &name, &outcome, &status, &code); err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(actor, "ses_") {
			actor = "ses"
		}
		got = append(got, fmt.Sprintf("%s %s %s %d %s", actor, name, outcome, status, code))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ses alice@example.com succeeded 303 ",
		"anonymous  denied 403 unauthenticated", // the wrong nonce
		"anonymous bob@elsewhere.example denied 403 unauthenticated",
		"anonymous unsure@example.com denied 403 unauthenticated",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("sign-ins audited:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDiscoveryIsCachedForItsFreshness: within the freshness bound sign-ins reuse the
// discovery document; past it, it is fetched again and sign-in goes on.
func TestDiscoveryIsCachedForItsFreshness(t *testing.T) {
	t.Parallel()
	const freshness = time.Second
	env := servertest.Start(t, func(c *server.Config) { c.ProviderCacheFreshness = freshness })
	op := startOP(t, env)
	signInProvider(t, env, op, "corp")
	fetched := op.DiscoveryRequests()
	start := time.Now()
	newBrowser(t, env).toProvider(t, op, "/signin?provider=corp")
	if n := op.DiscoveryRequests(); time.Since(start) < freshness/2 && n != fetched {
		t.Errorf("discovery fetched %d times within the freshness bound", n-fetched)
	}
	time.Sleep(freshness + 100*time.Millisecond)
	if p := newBrowser(t, env).through(t, op, "/signin?provider=corp", "alice"); p.Status != http.StatusSeeOther {
		t.Fatalf("sign-in after the freshness bound: %d %s", p.Status, p.Body)
	}
	if n := op.DiscoveryRequests(); n != fetched+1 {
		t.Errorf("discovery fetched %d times after the bound; want once", n-fetched)
	}
}

// TestSignInFailsClosedWhenTheProviderIsDown: discovery and keys are cached for their
// freshness; once stale, a provider that cannot be reached refuses sign-in (503), with no
// redirect anywhere.
func TestSignInFailsClosedWhenTheProviderIsDown(t *testing.T) {
	t.Parallel()
	const freshness = 3 * time.Second
	env := servertest.Start(t, func(c *server.Config) { c.ProviderCacheFreshness = freshness })
	op := startOP(t, env)
	signInProvider(t, env, op, "corp") // discovery and keys are fetched now
	op.Stop()
	stopped := time.Now()

	// Fresh: the cached discovery still serves the redirect (the sign-in would then fail at the
	// provider, which is down; nothing is trusted that was not fetched within the bound).
	if p := newBrowser(t, env).get(t, "/signin?provider=corp"); time.Since(stopped) < freshness/2 && p.Status != http.StatusSeeOther {
		t.Errorf("within the freshness bound: %d %s", p.Status, p.Body)
	}
	time.Sleep(time.Until(stopped.Add(freshness + 200*time.Millisecond)))
	p := newBrowser(t, env).get(t, "/signin?provider=corp")
	if p.Status != http.StatusServiceUnavailable || p.Location != "" || !strings.Contains(p.Body, "cannot be reached") {
		t.Errorf("stale cache, provider down: %d %q %s", p.Status, p.Location, p.Body)
	}
	var flows int
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM signin_flows WHERE purpose = 'signin'`).Scan(&flows); err != nil || flows > 1 {
		t.Errorf("sign-in flows recorded: %d %v; the refused one must record none", flows, err)
	}
}

// TestSignInInProduction: in production the pages need HTTPS (here from a trusted proxy) and
// the cookies are __Host- and Secure; an environment provider serves sign-in as it is.
func TestSignInInProduction(t *testing.T) {
	t.Parallel()
	const public = "https://renga.test"
	op := oidctest.Start(t, []string{public + "/signin/callback"}, callers...)
	envProviders, err := domain.ParseEnvProviders(fmt.Sprintf(`[{"slug":"corp","protocol":"oidc","issuer":%q,"display_name":"Corp",
		"client_id":%q,"client_secret":%q,"allowed_email_domains":["example.com"]}]`, op.Issuer, op.ClientID, op.ClientSecret))
	if err != nil {
		t.Fatal(err)
	}
	env := servertest.Start(t, func(c *server.Config) {
		c.Environment, c.PublicURL, c.IdentityProviders = server.EnvProduction, public, envProviders
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	})
	env.Track(op.ClientSecret)
	corpID := envProviders[0].ID()
	if _, _, err := (domain.Providers{Env: envProviders}).PutSupportSource(context.Background(), env.Pool, 1,
		domain.SupportSourceWrite{Enabled: true, ProviderID: &corpID, AllowedEmails: []string{"alice@example.com"}}); err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, https bool, cookies ...*http.Cookie) *http.Response {
		t.Helper()
		r, err := http.NewRequest(http.MethodGet, env.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if https {
			r.Header.Set("X-Forwarded-Proto", "https")
		}
		for _, ck := range cookies {
			r.AddCookie(ck)
		}
		resp, err := c.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		return resp
	}
	cookieNamed := func(resp *http.Response, name string) *http.Cookie {
		for _, ck := range resp.Cookies() {
			if ck.Name == name && ck.Value != "" {
				return ck
			}
		}
		t.Fatalf("no cookie %s in %v", name, resp.Header.Values("Set-Cookie"))
		return nil
	}
	strict := func(ck *http.Cookie) {
		t.Helper()
		if !ck.Secure || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/" || ck.Domain != "" {
			t.Errorf("cookie %s: %+v", ck.Name, ck)
		}
	}

	if resp := get("/signin?provider=corp", false); resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign-in over plain http in production: %d", resp.StatusCode)
	}
	resp := get("/signin?provider=corp", true)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("start: %d", resp.StatusCode)
	}
	flow := cookieNamed(resp, "__Host-"+server.FlowCookie)
	strict(flow)
	back := atProvider(t, env, op, resp.Header.Get("Location"), "alice")
	resp = get(strings.TrimPrefix(back.String(), public), true, &http.Cookie{Name: flow.Name, Value: flow.Value})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("callback: %d", resp.StatusCode)
	}
	session := cookieNamed(resp, "__Host-"+server.SessionCookie)
	strict(session)
	env.Track(session.Value)
	r, _ := http.NewRequest(http.MethodGet, env.URL+"/signin", nil)
	r.Header.Set("X-Forwarded-Proto", "https")
	r.AddCookie(&http.Cookie{Name: session.Name, Value: session.Value})
	page := (&browser{env: env, c: c}).do(t, r)
	if !strings.Contains(page.Body, "alice@example.com") || !strings.Contains(page.Body, "with <bdi>Corp</bdi>") {
		t.Errorf("signed-in page in production: %d %s", page.Status, page.Body)
	}
}

// TestProviderTestRefusals: a test cannot start without a stored provider's pending revision
// or the scope; an expired test URL opens nothing; a test completed after its token was
// revoked activates nothing; ended flows and sessions are purged.
func TestProviderTestRefusals(t *testing.T) {
	t.Parallel()
	envProviders, err := domain.ParseEnvProviders(`[{"slug":"fixed","protocol":"oidc","issuer":"https://login.example.com","display_name":"F","client_id":"c"}]`)
	if err != nil {
		t.Fatal(err)
	}
	env := servertest.Start(t, func(c *server.Config) { c.IdentityProviders = envProviders })
	op := startOP(t, env)
	token := env.Token(t, "providers:write", "audit:read")
	p := storeProvider(t, env, token, op, "corp")
	testPath := func(id string) string { return providersPath + "/" + id + "/tests" }

	for name, c := range map[string]struct {
		token, id string
		status    int
		code      string
	}{
		"environment provider": {token, envProviders[0].ID(), http.StatusConflict, "read_only"},
		"unknown provider":     {token, "idp_00000000000000000000000000", http.StatusNotFound, "not_found"},
		"providers:read":       {env.Token(t, "providers:read"), p.ID, http.StatusForbidden, "insufficient_scope"},
	} {
		rep := send(t, env, req{Method: http.MethodPost, Path: testPath(c.id), Token: c.token, Header: headers("Idempotency-Key", newKey())})
		if rep.Status != c.status || rep.problem(t).Error != c.code {
			t.Errorf("%s: %d %s; want %d %s", name, rep.Status, rep.Body, c.status, c.code)
		}
	}

	// Expired before it was opened.
	expired, _ := startTest(t, env, token, p.ID)
	if _, err := env.Pool.Exec(context.Background(), `UPDATE signin_flows SET expires_at = now() - interval '2 days'`); err != nil {
		t.Fatal(err)
	}
	if pg := newBrowser(t, env).get(t, expired); pg.Status != http.StatusForbidden || !strings.Contains(pg.Body, "has expired") {
		t.Errorf("expired test URL: %d %s", pg.Status, pg.Body)
	}

	// The token that started the test is revoked before the callback.
	short := env.Token(t, "providers:write")
	testURL, _ := startTest(t, env, short, p.ID)
	b := newBrowser(t, env)
	authorize := b.toProvider(t, op, testURL)
	if rep := send(t, env, req{Method: http.MethodPost, Path: "/api/v1/operator/tokens/self/revoke", Token: short}); rep.Status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", rep.Status, rep.Body)
	}
	if pg := b.get(t, atProvider(t, env, op, authorize, "alice").String()); pg.Status != http.StatusForbidden || !strings.Contains(pg.Body, "revoked") {
		t.Errorf("test completed after its token was revoked: %d %s", pg.Status, pg.Body)
	}
	if got, _ := getProvider(t, env, token, p.ID); got.ActiveRevision != nil {
		t.Errorf("activated by a revoked token's test: %+v", got)
	}

	// Retention: the flow expired two days ago goes, the others stay; a session a week past
	// its expiry goes.
	if _, err := env.Pool.Exec(context.Background(), `INSERT INTO deployment_sessions (id, token_hash, provider_id, subject, email, expires_at)
		VALUES ('ses_old', sha256('old'), $1, 's', 'a@example.com', now() - interval '8 days'),
		       ('ses_new', sha256('new'), $1, 's', 'a@example.com', now() + interval '1 hour')`, p.ID); err != nil {
		t.Fatal(err)
	}
	flows, sessions, err := domain.PurgeEndedSignIns(context.Background(), env.Pool)
	if err != nil || flows != 1 || sessions != 1 {
		t.Errorf("purge: %d flows, %d sessions, %v; want 1 and 1", flows, sessions, err)
	}
}

// TestSignInPagesAreRateLimited: the pages share the per-address limit of unauthenticated
// requests.
func TestSignInPagesAreRateLimited(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.RateLimitAnonymous, c.RateLimitAnonymousBurst = 0.01, 2 })
	b := newBrowser(t, env)
	var statuses []int
	for range 3 {
		statuses = append(statuses, b.get(t, "/signin").Status)
	}
	if statuses[0] != http.StatusOK || statuses[1] != http.StatusOK || statuses[2] != http.StatusTooManyRequests {
		t.Errorf("three sign-in pages at once: %v; want 200 200 429", statuses)
	}
}

// TestSignInEmailBoundaries: a provider with no domain list signs in any verified email the
// support source names, and an email with a one-character local part is an email.
//
// Fails when: a provider without allowed_email_domains refuses everyone, or an "@" at index 1
// is taken for no local part (the mutants signin.go:275 `> 0` made `>= 0` and `< 1` made `<= 1`
// lived: every test provider had a domain list, and every test email a longer local part).
func TestSignInEmailBoundaries(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	op := startOP(t, env)
	token := env.Token(t, "providers:write", "support:write")
	p, _ := createProvider(t, env, token, map[string]any{"slug": "open", "protocol": "oidc", "issuer": op.Issuer,
		"display_name": "Open", "client_id": op.ClientID, "client_secret": map[string]string{"value": op.ClientSecret}})
	activateByTest(t, env, token, op, p.ID)
	op.AddUser(oidctest.User{Username: "a", Email: "a@example.com", EmailVerified: true})
	putSupportSource(t, env, token, map[string]any{"enabled": true, "provider_id": p.ID,
		"allowed_emails": []string{"a@example.com", "bob@elsewhere.example"}})
	for _, who := range []string{"a", "bob"} {
		b := newBrowser(t, env)
		if pg := b.through(t, op, "/signin?provider=open", who); pg.Status != http.StatusSeeOther {
			t.Errorf("%s through a provider with no domain list: %d %s", who, pg.Status, pg.Body)
		}
		for _, c := range b.c.Jar.Cookies(mustURL(t, env.URL)) {
			env.Track(c.Value)
		}
	}
}
