package apitest

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/server/oidctest"
	"renga.dev/renga/server/servertest"
)

// supportActivity is the organization's Activity entries of support reads, newest first.
func supportActivity(t testing.TB, env *servertest.Env, owner string) []activityEntry {
	t.Helper()
	var list struct {
		Items []activityEntry `json:"items"`
	}
	send(t, env, req{Method: http.MethodGet, Path: "/api/v1/org/activity?page_size=500", Token: owner}).decode(t, &list)
	var out []activityEntry
	for _, a := range list.Items {
		if a.Actor.Type == "support_person" {
			out = append(out, a)
		}
	}
	return out
}

type activityEntry struct {
	Time  time.Time `json:"time"`
	Actor struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name_snapshot"`
	} `json:"actor"`
	Operation string   `json:"operation"`
	Changed   []string `json:"changed_fields"`
}

// signedInSupport is a browser signed in as username through op.
func signedInSupport(t testing.TB, env *servertest.Env, op *oidctest.Provider, username string) *browser {
	t.Helper()
	b := newBrowser(t, env)
	if p := b.through(t, op, "/signin?provider=corp", username); p.Status != http.StatusSeeOther {
		t.Fatalf("sign in as %s: %d %s", username, p.Status, p.Body)
	}
	for _, c := range b.c.Jar.Cookies(mustURL(t, env.URL)) {
		env.Track(c.Value)
	}
	return b
}

// TestSupportConsole: a support person sees the organizations that granted them access and
// reads each one's inventory (agents, observations, jobs, settings), every read in that
// organization's Activity (who, what, when) and the audit; without an active grant (none,
// another's, another organization's, revoked, expired) it is 403 and nothing is shown or
// recorded; a grant for one support person lets no other in.
func TestSupportConsole(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	op := startOP(t, env)
	op.AddUser(oidctest.User{Username: "carol", Email: "carol@example.com", EmailVerified: true})
	signInProvider(t, env, op, "corp")

	s := newAgentSetup(t, env)
	s.Agent.submit(t, batchBody("console-1", 2, 0)).accepted(t)
	if rep := send(t, env, createJobReq(s.Owner, s.Agent.ID, "uptime")); rep.Status != http.StatusCreated {
		t.Fatalf("job: %d %s", rep.Status, rep.Body)
	}
	other := newAgentSetup(t, env) // an organization that granted nothing

	alice := signedInSupport(t, env, op, "alice")
	carol := signedInSupport(t, env, op, "carol")
	orgPage := "/support/organizations/" + s.OrgID
	pages := []string{orgPage, orgPage + "/agents/" + s.Agent.ID, orgPage + "/jobs", orgPage + "/settings"}
	refused := func(who string, b *browser, path string) {
		t.Helper()
		p := b.get(t, path)
		if p.Status != http.StatusForbidden || !strings.Contains(p.Body, "No active support grant") || strings.Contains(p.Body, s.Agent.ID[4:10]) {
			t.Errorf("%s GET %s: %d %s; want 403 showing nothing", who, path, p.Status, p.Body)
		}
	}

	// Before any grant.
	if p := alice.get(t, "/support"); p.Status != http.StatusOK || !strings.Contains(p.Body, `id="none"`) ||
		p.Header.Get("Content-Security-Policy") != "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'" {
		t.Errorf("console before a grant: %d %s %v", p.Status, p.Body, p.Header)
	}
	for _, path := range pages {
		refused("alice before a grant", alice, path)
	}
	// Not signed in: to sign-in.
	if p := newBrowser(t, env).get(t, orgPage); p.Status != http.StatusSeeOther || p.Location != "/signin" {
		t.Errorf("console without a session: %d %q", p.Status, p.Location)
	}

	// A grant for alice only.
	g := grantSupport(t, env, s.Owner, time.Now().Add(time.Hour), "alice@example.com")
	if p := alice.get(t, "/support"); !strings.Contains(p.Body, `href="/support/organizations/`+s.OrgID+`"`) {
		t.Errorf("alice's console: %s", p.Body)
	}
	want := map[string]string{
		pages[0]: "host-" + s.Agent.ID[4:10],
		pages[1]: "host.facts",
		pages[2]: "uptime",
		pages[3]: "Session max age",
	}
	for _, path := range pages {
		p := alice.get(t, path)
		if p.Status != http.StatusOK || !strings.Contains(p.Body, want[path]) {
			t.Errorf("alice GET %s: %d %s; want it to show %q", path, p.Status, p.Body, want[path])
		}
	}
	for _, path := range pages {
		refused("carol (the grant is alice's)", carol, path)
	}
	refused("alice, another organization", alice, "/support/organizations/"+other.OrgID)
	refused("alice, a malformed organization", alice, "/support/organizations/nothing")

	acts := supportActivity(t, env, s.Owner)
	var ops []string
	for _, a := range acts {
		ops = append(ops, a.Operation)
		if a.Actor.Name != "alice@example.com" || !strings.HasPrefix(a.Actor.ID, "ses_") || time.Since(a.Time) > time.Minute || len(a.Changed) != 0 {
			t.Errorf("Activity entry: %+v", a)
		}
	}
	if got := strings.Join(ops, ","); got != "supportGetSettings,supportListJobs,supportListObservations,supportListAgents" {
		t.Errorf("support reads in the Activity: %s", got)
	}
	if n := len(supportActivity(t, env, other.Owner)); n != 0 {
		t.Errorf("support reads in an organization that granted nothing: %d", n)
	}
	var audited int
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM audit_events WHERE actor_type = 'support_person'
		AND organization_id = $1 AND actor_name = 'alice@example.com'`, s.OrgID).Scan(&audited); err != nil || audited != 4 {
		t.Errorf("support reads audited: %d %v; want 4", audited, err)
	}

	// Suspended: the owners cannot revoke, so the grant lets nobody in until it is active again.
	operator := env.Token(t, "organizations:write")
	orgPath := "/api/v1/operator/organizations/" + s.OrgID
	if rep := send(t, env, req{Method: http.MethodPost, Path: orgPath + "/suspend", Token: operator,
		Body: jsonBody(map[string]string{"reason": "billing"})}); rep.Status != http.StatusOK {
		t.Fatalf("suspend: %d %s", rep.Status, rep.Body)
	}
	refused("alice while the organization is suspended", alice, orgPage)
	if rep := send(t, env, req{Method: http.MethodPost, Path: orgPath + "/resume", Token: operator}); rep.Status != http.StatusOK {
		t.Fatalf("resume: %d %s", rep.Status, rep.Body)
	}
	if p := alice.get(t, orgPage); p.Status != http.StatusOK {
		t.Errorf("alice after the resume: %d %s", p.Status, p.Body)
	}

	// Revoked: refused on the next request.
	if rep := send(t, env, req{Method: http.MethodDelete, Path: supportGrantsPath + "/" + g.ID, Token: s.Owner}); rep.Status != http.StatusOK {
		t.Fatalf("revoke: %d %s", rep.Status, rep.Body)
	}
	for _, path := range pages {
		refused("alice after the revocation", alice, path)
	}
	if p := alice.get(t, "/support"); !strings.Contains(p.Body, `id="none"`) {
		t.Errorf("alice's console after the revocation: %s", p.Body)
	}

	// A grant for any support person lets carol in; once it expires, nobody.
	g = grantSupport(t, env, s.Owner, time.Now().Add(time.Hour), "")
	if p := carol.get(t, orgPage); p.Status != http.StatusOK {
		t.Errorf("carol under a grant for any support person: %d %s", p.Status, p.Body)
	}
	if _, err := env.Pool.Exec(context.Background(), `UPDATE support_grants SET granted_at = now() - interval '2 hours',
		expires_at = now() - interval '1 second' WHERE id = $1`, g.ID); err != nil {
		t.Fatal(err)
	}
	refused("carol after the grant expired", carol, orgPage)
	if n := len(supportActivity(t, env, s.Owner)); n != 6 {
		t.Errorf("support reads in the Activity after the refusals: %d; want 6 (refusals record nothing)", n)
	}
}
