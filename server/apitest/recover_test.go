package apitest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// Local recovery sign-in (RFD 15's escape hatch, DESIGN §6), end to end: a real server, real
// PostgreSQL, real HTTP. The recovery is made the one way there is, the domain function the
// release command calls (cli/recover_local_test.go runs the command itself).

// recoverLocal makes a recovery for email as `renga identity-provider recover-local` does, and
// tracks its code (it must appear nowhere but in what the command prints).
func recoverLocal(t testing.TB, env *servertest.Env, email string, lifetime time.Duration) (domain.LocalRecovery, string) {
	t.Helper()
	var rec domain.LocalRecovery
	var code string
	err := db.WithTx(context.Background(), env.Pool, func(tx pgx.Tx) error {
		var err error
		rec, code, err = domain.RecoverLocal(context.Background(), tx, email, lifetime, server.NewInvocationID())
		return err
	})
	if err != nil {
		t.Fatalf("recover-local %s: %v", email, err)
	}
	env.Track(code)
	if !strings.HasPrefix(code, domain.LocalRecoveryCodePrefix) {
		t.Fatalf("code %.20s... has no prefix", code)
	}
	return rec, code
}

// recoveryOrigin is the Origin a browser sends from the deployment's own pages.
func recoveryOrigin(env *servertest.Env) http.Header {
	u, err := url.Parse(env.Config.PublicURL)
	if err != nil {
		panic(err)
	}
	return http.Header{"Origin": {u.Scheme + "://" + u.Host}}
}

var regexpWho = regexp.MustCompile(`signed in as <strong><bdi>([^<]*)</bdi></strong>(?: \(<bdi>[^<]*</bdi>\))? with <bdi>([^<]*)</bdi>, until`)

// recoverForm opens the recovery page and returns its CSRF token.
func (b *browser) recoverForm(t testing.TB) string {
	t.Helper()
	p := b.get(t, server.SignInRecoverPath)
	m := csrfField.FindStringSubmatch(p.Body)
	if p.Status != http.StatusOK || m == nil || !strings.Contains(p.Body, `name="code"`) {
		t.Fatalf("recovery page: %d %s", p.Status, p.Body)
	}
	for _, c := range b.c.Jar.Cookies(mustURL(t, b.env.URL)) {
		b.env.Track(c.Value)
	}
	return m[1]
}

// recover fills and posts the recovery form.
func (b *browser) recover(t testing.TB, email, code string) page {
	t.Helper()
	csrf := b.recoverForm(t)
	return b.post(t, server.SignInRecoverPath, url.Values{"csrf": {csrf}, "email": {email}, "code": {code}}, recoveryOrigin(b.env))
}

// signedIn tracks the browser's cookies (its session) and returns who /signin says it is.
func (b *browser) signedIn(t testing.TB) string {
	t.Helper()
	for _, c := range b.c.Jar.Cookies(mustURL(t, b.env.URL)) {
		b.env.Track(c.Value)
	}
	p := b.get(t, "/signin")
	if m := regexpWho.FindStringSubmatch(p.Body); m != nil {
		return m[1] + " with " + m[2]
	}
	return ""
}

const genericRefusal = "This email and code do not match a local recovery sign-in that can still be used."

func expectRecoveryRefused(t testing.TB, name string, p page, code string) {
	t.Helper()
	if p.Status != http.StatusForbidden || !strings.Contains(p.Body, genericRefusal) {
		t.Errorf("%s: %d %s; want 403 with the one generic refusal", name, p.Status, p.Body)
	}
	if strings.Contains(p.Body, code) {
		t.Errorf("%s: the refusal shows the code", name)
	}
	for _, c := range p.Header.Values("Set-Cookie") {
		if strings.HasPrefix(c, server.SessionCookie+"=") && !strings.HasPrefix(c, server.SessionCookie+"=;") {
			t.Errorf("%s set a session cookie: %s", name, c)
		}
	}
}

// TestLocalRecoverySignIn: a recovery code signs its person in once (a session of method
// local_recovery, no provider, the same cookie and table as a provider's sign-in, and the
// support console lets them in); a wrong code, another email, a used, expired or superseded
// code all get one refusal with no hint which; the form is CSRF-bound; the support source
// must still name the person; every attempt is audited, and the code is nowhere: audit,
// Activity, logs (servertest scans them), error pages, the database (only its SHA-256).
//
// Fails when: the UPDATE that spends a recovery drops `used_at IS NULL` (the second use signs
// in), or `expires_at > now()` (the expired code signs in), or the email condition (another
// email signs in); when the refusal audit records the email field as typed (the code typed
// there reaches the audit: the secret scan fails).
func TestLocalRecoverySignIn(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	op := startOP(t, env)
	signInProvider(t, env, op, "corp") // the support source names example.com
	ctx := context.Background()

	// The page: server-rendered, the sign-in pages' CSP, linked from /signin.
	b := newBrowser(t, env)
	if p := b.get(t, "/signin"); !strings.Contains(p.Body, `href="/signin/recover"`) {
		t.Errorf("/signin does not link the recovery page: %s", p.Body)
	}
	form := b.get(t, server.SignInRecoverPath)
	if form.Status != http.StatusOK || form.Header.Get("Content-Security-Policy") != "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'" ||
		form.Header.Get("Cache-Control") != "no-store" || strings.Contains(form.Body, "<script") {
		t.Errorf("recovery page: %d %v %s", form.Status, form.Header, form.Body)
	}

	_, code := recoverLocal(t, env, "Alice@Example.com", 15*time.Minute)
	var stored string
	if err := env.Pool.QueryRow(ctx, `SELECT encode(code_hash, 'hex') FROM local_recoveries WHERE email = 'alice@example.com'`).Scan(&stored); err != nil ||
		stored != fmt.Sprintf("%x", domain.HashSecret(code)) {
		t.Fatalf("stored: %q %v; want the code's SHA-256", stored, err)
	}

	// Refusals before the right attempt: none spends the code.
	expectRecoveryRefused(t, "a wrong code", b.recover(t, "alice@example.com", code[:len(code)-1]+"x"), code)
	expectRecoveryRefused(t, "another email", b.recover(t, "carol@example.com", code), code)
	expectRecoveryRefused(t, "no code", b.recover(t, "alice@example.com", ""), code)
	expectRecoveryRefused(t, "the code in the email field", b.recover(t, code, code), code)
	csrf := b.recoverForm(t)
	if p := b.post(t, server.SignInRecoverPath, url.Values{"email": {"alice@example.com"}, "code": {code}}, recoveryOrigin(env)); p.Status != http.StatusForbidden ||
		!strings.Contains(p.Body, "stale") {
		t.Errorf("no CSRF token: %d %s", p.Status, p.Body)
	}
	if p := b.post(t, server.SignInRecoverPath, url.Values{"csrf": {csrf}, "email": {"alice@example.com"}, "code": {code}},
		http.Header{"Origin": {"https://evil.example"}}); p.Status != http.StatusForbidden || !strings.Contains(p.Body, "own page") {
		t.Errorf("cross origin: %d %s", p.Status, p.Body)
	}
	if p := newBrowser(t, env).post(t, server.SignInRecoverPath, url.Values{"csrf": {csrf}, "email": {"alice@example.com"}, "code": {code}},
		recoveryOrigin(env)); p.Status != http.StatusForbidden || !strings.Contains(p.Body, "stale") {
		t.Errorf("another browser's CSRF token: %d %s", p.Status, p.Body)
	}

	// The right email (any case) and code: a session.
	done := b.recover(t, "ALICE@example.com", code)
	if done.Status != http.StatusSeeOther || done.Location != "/signin" {
		t.Fatalf("recovery sign-in: %d %q %s", done.Status, done.Location, done.Body)
	}
	if who := b.signedIn(t); who != "alice@example.com with local recovery" {
		t.Errorf("signed in as %q", who)
	}
	var method string
	var provider *string
	if err := env.Pool.QueryRow(ctx, `SELECT s.method, s.provider_id FROM deployment_sessions s
		JOIN local_recoveries r ON r.session_id = s.id AND s.subject = r.id
		WHERE r.email = 'alice@example.com' AND r.used_at IS NOT NULL AND s.revoked_at IS NULL`).Scan(&method, &provider); err != nil ||
		method != "local_recovery" || provider != nil {
		t.Errorf("session: %q %v %v", method, provider, err)
	}
	if p := b.get(t, "/support"); p.Status != http.StatusOK || !strings.Contains(p.Body, "alice@example.com") {
		t.Errorf("the support console with a recovery session: %d %s", p.Status, p.Body)
	}

	// Once only.
	expectRecoveryRefused(t, "the used code", newBrowser(t, env).recover(t, "alice@example.com", code), code)

	// Expired: the same refusal.
	rec, expired := recoverLocal(t, env, "alice@example.com", time.Minute)
	if _, err := env.Pool.Exec(ctx, `UPDATE local_recoveries SET created_at = now() - interval '2 minutes',
		expires_at = now() - interval '1 second' WHERE id = $1`, rec.ID); err != nil {
		t.Fatal(err)
	}
	expectRecoveryRefused(t, "an expired code", newBrowser(t, env).recover(t, "alice@example.com", expired), expired)

	// A newer recovery for the same email revokes the older one.
	_, older := recoverLocal(t, env, "alice@example.com", time.Hour)
	_, newer := recoverLocal(t, env, "alice@example.com", time.Hour)
	expectRecoveryRefused(t, "a superseded code", newBrowser(t, env).recover(t, "alice@example.com", older), older)

	// The support source still decides: a person it does not name is refused (and the code
	// stays usable), and a recovery session ends when it stops naming them.
	token := env.Token(t, "support:write", "support:read")
	var src supportSource
	send(t, env, req{Method: http.MethodGet, Path: supportSourcePath, Token: token}).decode(t, &src)
	putSupportSource(t, env, token, map[string]any{"enabled": true, "provider_id": *src.ProviderID, "allowed_emails": []string{"carol@example.com"}})
	if who := b.signedIn(t); who != "" {
		t.Errorf("a recovery session outlived the support source naming its person: %q", who)
	}
	if p := newBrowser(t, env).recover(t, "alice@example.com", newer); p.Status != http.StatusForbidden || !strings.Contains(p.Body, "does not name alice@example.com") {
		t.Errorf("a person the support source does not name: %d %s", p.Status, p.Body)
	}
	putSupportSource(t, env, token, map[string]any{"enabled": true, "provider_id": *src.ProviderID, "allowed_email_domain": "example.com"})
	again := newBrowser(t, env)
	if p := again.recover(t, "alice@example.com", newer); p.Status != http.StatusSeeOther {
		t.Errorf("the code after the support source names alice again: %d %s", p.Status, p.Body)
	}
	if who := again.signedIn(t); who != "alice@example.com with local recovery" {
		t.Errorf("signed in as %q", who)
	}

	// Audited: each attempt that reached the code check, never the code; the refused ones by
	// anonymous with the email given only when it is an email.
	var events []struct{ Actor, Name, Outcome, Error string }
	rows, err := env.Pool.Query(ctx, `SELECT actor_id, actor_name, outcome, COALESCE(error, '') FROM audit_events
		WHERE operation = 'signInLocalRecovery' AND actor_type = 'support_person' ORDER BY time, id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var e struct{ Actor, Name, Outcome, Error string }
		if err := rows.Scan(&e.Actor, &e.Name, &e.Outcome, &e.Error); err != nil {
			t.Fatal(err)
		}
		events = append(events, e)
	}
	var got []string
	for _, e := range events {
		actor := e.Actor
		if strings.HasPrefix(actor, "ses_") {
			actor = "ses"
		}
		got = append(got, actor+" "+e.Name+" "+e.Outcome+" "+e.Error)
	}
	want := []string{
		"anonymous alice@example.com denied unauthenticated", // wrong code
		"anonymous carol@example.com denied unauthenticated", // another email
		"anonymous alice@example.com denied unauthenticated", // no code
		"anonymous  denied unauthenticated",                  // the code in the email field: not recorded
		"ses alice@example.com succeeded ",
		"anonymous alice@example.com denied unauthenticated", // used
		"anonymous alice@example.com denied unauthenticated", // expired
		"anonymous alice@example.com denied unauthenticated", // superseded
		"anonymous alice@example.com denied unauthenticated", // not named by the support source
		"ses alice@example.com succeeded ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit of recovery sign-ins:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if leaked, err := env.LeakedSecrets(); err != nil || len(leaked) != 0 {
		t.Errorf("the code (or a cookie) leaked into the logs or the database: %d %v", len(leaked), err)
	}
}

// TestLocalRecoveryIsSpentOnce: one code posted by several browsers at once signs exactly one
// of them in.
//
// Fails when: the UPDATE that spends a recovery drops `used_at IS NULL` (every browser wins).
func TestLocalRecoveryIsSpentOnce(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	op := startOP(t, env)
	signInProvider(t, env, op, "corp")
	const browsers = 6
	for trial := range 3 {
		_, code := recoverLocal(t, env, "alice@example.com", time.Hour)
		forms := make([]url.Values, browsers)
		bs := make([]*browser, browsers)
		for i := range bs {
			bs[i] = newBrowser(t, env)
			forms[i] = url.Values{"csrf": {bs[i].recoverForm(t)}, "email": {"alice@example.com"}, "code": {code}}
		}
		statuses := make([]int, browsers)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range bs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, _ := http.NewRequest(http.MethodPost, env.URL+server.SignInRecoverPath, strings.NewReader(forms[i].Encode()))
				r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				resp, err := bs[i].c.Do(r)
				if err != nil {
					return
				}
				statuses[i] = resp.StatusCode
				_ = resp.Body.Close()
			}()
		}
		close(start)
		wg.Wait()
		won := 0
		for _, s := range statuses {
			if s == http.StatusSeeOther {
				won++
			} else if s != http.StatusForbidden {
				t.Errorf("trial %d: a use answered %d", trial, s)
			}
		}
		sessions := countRows(t, env, `SELECT count(*) FROM deployment_sessions WHERE method = 'local_recovery' AND revoked_at IS NULL`)
		if won != 1 || sessions != trial+1 {
			t.Fatalf("trial %d: %d of %d concurrent uses of one code won (%v), %d recovery sessions; want exactly one", trial, won, browsers, statuses, sessions)
		}
		for _, b := range bs {
			b.signedIn(t)
		}
	}
}

// TestLockoutGuardCountsLocalRecovery: an open recovery (unused, unrevoked, unexpired) is a
// usable sign-in method, so the last provider can be disabled after recover-local; a used or
// expired one is not; the recovery session lives on without any provider.
//
// Fails when: usableSignIn does not count open recoveries (the disable after recover-local is
// 409 lockout), or counts used or expired ones (the disables that must be refused succeed).
func TestLockoutGuardCountsLocalRecovery(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	op := startOP(t, env)
	p := signInProvider(t, env, op, "corp")
	token := env.Token(t, "providers:write")
	ctx := context.Background()
	disable := func() reply {
		return send(t, env, req{Method: http.MethodPost, Path: providersPath + "/" + p.ID + "/disable", Token: token})
	}
	expectLockout := func(when string) {
		t.Helper()
		if rep := disable(); rep.Status != http.StatusConflict || rep.problem(t).Error != "lockout" {
			t.Fatalf("disable the last provider %s: %d %s; want 409 lockout", when, rep.Status, rep.Body)
		}
	}
	expectLockout("with no recovery")

	// Expired: not usable.
	rec, _ := recoverLocal(t, env, "alice@example.com", time.Minute)
	if _, err := env.Pool.Exec(ctx, `UPDATE local_recoveries SET created_at = now() - interval '2 minutes',
		expires_at = now() - interval '1 second' WHERE id = $1`, rec.ID); err != nil {
		t.Fatal(err)
	}
	expectLockout("with an expired recovery")

	// Used: not usable any more.
	_, code := recoverLocal(t, env, "alice@example.com", time.Hour)
	b := newBrowser(t, env)
	if pg := b.recover(t, "alice@example.com", code); pg.Status != http.StatusSeeOther {
		t.Fatalf("recovery sign-in: %d %s", pg.Status, pg.Body)
	}
	expectLockout("with a used recovery")

	// Open, for someone the support source stopped naming: it signs nobody in, so it does not
	// count. (Fails when every open recovery counts.)
	recoverLocal(t, env, "alice@example.com", time.Hour)
	sourceToken := env.Token(t, "support:write")
	putSupportSource(t, env, sourceToken, map[string]any{"enabled": true, "provider_id": p.ID, "allowed_email_domain": "other.example"})
	expectLockout("with a recovery for someone the support source no longer names")
	putSupportSource(t, env, sourceToken, map[string]any{"enabled": true, "provider_id": p.ID, "allowed_email_domain": "example.com"})

	// Open: usable, so the last provider can go.
	if rep := disable(); rep.Status != http.StatusOK {
		t.Fatalf("disable the last provider after recover-local: %d %s", rep.Status, rep.Body)
	}
	if n := countRows(t, env, `SELECT count(*) FROM identity_providers WHERE state = 'enabled'`); n != 0 {
		t.Errorf("enabled providers: %d", n)
	}
	// No provider serves sign-in; the recovery session lives on (the support source still
	// names alice), and the open recovery still signs her in elsewhere.
	if who := b.signedIn(t); who != "alice@example.com with local recovery" {
		t.Errorf("the recovery session after the provider was disabled: %q", who)
	}
	if pg := b.get(t, "/support"); pg.Status != http.StatusOK {
		t.Errorf("support console: %d %s", pg.Status, pg.Body)
	}
}

// TestRecoverLocalIsUnreachableOverHTTP: no request makes a local recovery. Every operation
// of the spec, called with a token holding every scope, and every route the server mounts,
// with every method, the same token and a body naming a support person, leave no recovery
// and no recoverLocal audit event; no operation of the spec is about recovery.
//
// Fails when: any route makes a recovery (shown by mounting `POST /signin/recover-local`
// calling domain.RecoverLocal for a request with a bearer token: the walk of the mux finds it)
// or any operation does (shown by making listIdentityProviders call it: the spec's walk finds
// it).
func TestRecoverLocalIsUnreachableOverHTTP(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	op := startOP(t, env)
	signInProvider(t, env, op, "corp") // a recovery for alice@example.com would be allowed
	full := env.Token(t, servertest.AllScopes()...)

	for _, o := range specOps(t) {
		if strings.Contains(strings.ToLower(o.ID+o.Route), "recover") {
			t.Errorf("the spec has an operation about recovery: %s %s (%s)", o.Method, o.Route, o.ID)
		}
		r, ok := minimalRequest(t, o, full)
		if !ok {
			continue
		}
		if rep := send(t, env, r); rep.Status >= 500 {
			t.Errorf("%s: %d %s", o.ID, rep.Status, rep.Body)
		}
	}

	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	bodies := []struct{ contentType, body string }{
		{"application/x-www-form-urlencoded", url.Values{"email": {"alice@example.com"}, "expires_in": {"15m"}}.Encode()},
		{"application/json", `{"email": "alice@example.com", "expires_in": "15m"}`},
	}
	routes := env.Server.Routes()
	if len(routes) < 10 || !contains(routes, "GET "+server.SignInRecoverPath) || !contains(routes, "POST "+server.SignInRecoverPath) {
		t.Fatalf("the server's routes: %v", routes)
	}
	var paths []string
	for _, pattern := range routes {
		method, path, found := strings.Cut(pattern, " ")
		if !found {
			method, path = "", pattern
		}
		paths = append(paths, method+" "+pathParam.ReplaceAllString(path, "x"))
	}
	// Paths a recovery route could have been given (the API's and the catch-all "/" serve them).
	for _, p := range []string{"/api/v1/operator/identity-providers/recover-local", "/api/v1/operator/recover-local",
		"/api/v1/operator/identity-providers/" + nonexistentIDs["provider_id"] + "/recover-local", "/api/v1/org/recover-local",
		"/signin/recover-local", "/recover-local", "/signin/recover/local"} {
		paths = append(paths, " "+p)
	}
	sent := 0
	for _, mp := range paths {
		method, path, _ := strings.Cut(mp, " ")
		try := methods
		if method != "" {
			try = []string{method}
		}
		for _, m := range try {
			for _, b := range bodies {
				r := req{Method: m, Path: path, Token: full, Header: http.Header{"Content-Type": {b.contentType}, "Origin": recoveryOrigin(env)["Origin"]}}
				if m != http.MethodGet {
					r.Body = []byte(b.body)
				}
				if rep := send(t, env, r); rep.Status >= 500 || rep.Status == http.StatusTooManyRequests {
					t.Errorf("%s %s: %d %s", m, path, rep.Status, rep.Body)
				}
				sent++
			}
		}
	}
	if sent < 50 {
		t.Errorf("the walk sent %d requests", sent)
	}
	if n := countRows(t, env, `SELECT count(*) FROM local_recoveries`); n != 0 {
		t.Errorf("%d local recoveries made over HTTP; want none", n)
	}
	if n := countRows(t, env, `SELECT count(*) FROM audit_events WHERE operation = 'recoverLocal'`); n != 0 {
		t.Errorf("%d recoverLocal audit events from HTTP requests; want none", n)
	}
}
