package apitest

import (
	"context"
	"html"
	"net/http"
	"regexp"
	"slices"
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
	slices.Sort(ops) // entries of one millisecond list in either order
	if got := strings.Join(ops, ","); got != "supportGetSettings,supportListAgents,supportListJobs,supportListObservations" {
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

// TestSupportConsolePages: the console's lists come in pages, and following each full page's
// link reaches every row once, in the list's order (agents by registration, jobs and
// observations newest first); each page is a read of its own in the Activity; a cursor no page
// links is 400 and records nothing.
//
// Fails when: a page shows one row too many or too few, the next link is missing on a full
// page or present on the last, or the cursor is ignored (the second page repeats the first).
func TestSupportConsolePages(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	op := startOP(t, env)
	signInProvider(t, env, op, "corp")
	s := newAgentSetup(t, env)
	ctx := context.Background()
	// Rows past a page of each list (500 agents, 100 jobs, 50 observations), with SQL.
	const agents, jobs, observations = 501, 101, 51
	for _, q := range []string{
		`INSERT INTO installations (id, organization_id, public_key, hostname, os)
			SELECT 'ins_' || lpad(g::text, 26, '0'), $1, sha256(g::text::bytea), 'paged-' || g, 'linux' FROM generate_series(1, 500) g`,
		`INSERT INTO jobs (id, organization_id, installation_id, command)
			SELECT 'job_' || lpad(g::text, 26, '0'), $1, 'ins_' || lpad('1', 26, '0'), 'cmd-' || g FROM generate_series(1, 100) g`,
		`INSERT INTO observations (organization_id, installation_id, batch_id, observed_at, kind, data)
			SELECT $1, 'ins_' || lpad('1', 26, '0'), 'b', now(), 'paged', jsonb_build_object('n', g) FROM generate_series(1, 51) g`,
	} {
		if _, err := env.Pool.Exec(ctx, q, s.OrgID); err != nil {
			t.Fatal(err)
		}
	}
	if rep := send(t, env, createJobReq(s.Owner, s.Agent.ID, "cmd-real")); rep.Status != http.StatusCreated {
		t.Fatalf("job: %d %s", rep.Status, rep.Body)
	}
	grantSupport(t, env, s.Owner, time.Now().Add(time.Hour), "alice@example.com")
	alice := signedInSupport(t, env, op, "alice")

	orgPage := "/support/organizations/" + s.OrgID
	next := regexp.MustCompile(`id="next" href="([^"]+)"`)
	// walk follows a list's next links from first, and returns every row's key in page order and
	// the size of each page.
	walk := func(first string, row *regexp.Regexp) (keys []string, sizes []int) {
		t.Helper()
		for path := first; path != ""; {
			p := alice.get(t, path)
			if p.Status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, p.Status, p.Body)
			}
			rows := row.FindAllStringSubmatch(p.Body, -1)
			for _, m := range rows {
				keys = append(keys, m[1])
			}
			sizes = append(sizes, len(rows))
			path = ""
			if m := next.FindStringSubmatch(p.Body); m != nil {
				path = html.UnescapeString(m[1])
			}
			if len(sizes) > 5 {
				t.Fatalf("more pages than rows allow from %s", first)
			}
		}
		return keys, sizes
	}
	ordered := func(name string, keys []string, want int, desc bool) {
		t.Helper()
		seen := map[string]bool{}
		for i, k := range keys {
			if seen[k] {
				t.Errorf("%s: %s on two pages", name, k)
			}
			seen[k] = true
			if i > 0 && (keys[i-1] < k) == desc && keys[i-1] != k {
				t.Errorf("%s out of order: %s then %s", name, keys[i-1], k)
			}
		}
		if len(keys) != want {
			t.Errorf("%s: %d rows over the pages, want %d", name, len(keys), want)
		}
	}

	ids, sizes := walk(orgPage, regexp.MustCompile(`href="/support/organizations/org_[0-9a-z]+/agents/(ins_[0-9a-z]+)"`))
	ordered("agents", ids, agents, false)
	if !slices.Equal(sizes, []int{500, 1}) {
		t.Errorf("agent pages of %v rows, want [500 1]", sizes)
	}
	ids, sizes = walk(orgPage+"/jobs", regexp.MustCompile(`<tr><td>(job_[0-9a-z]{26})</td>`))
	ordered("jobs", ids, jobs, true)
	if !slices.Equal(sizes, []int{100, 1}) {
		t.Errorf("job pages of %v rows, want [100 1]", sizes)
	}
	ns, sizes := walk(orgPage+"/agents/ins_"+strings.Repeat("0", 25)+"1", regexp.MustCompile(`n&#34;: ([0-9]+)`))
	if len(ns) != observations || ns[0] != "51" || ns[len(ns)-1] != "1" || !slices.Equal(sizes, []int{50, 1}) {
		t.Errorf("observations over the pages: %v (pages %v)", ns, sizes)
	}

	// Each page was a read of its own; a cursor no page links is refused and records nothing.
	reads := len(supportActivity(t, env, s.Owner))
	if reads != 6 {
		t.Errorf("%d support reads in the Activity, want 6 (two pages of each list)", reads)
	}
	for _, path := range []string{orgPage + "?after=%3Cscript%3E", orgPage + "?after=ins_1&after=ins_2", orgPage + "/jobs?before=ins_1",
		orgPage + "/agents/" + s.Agent.ID + "?before=0", orgPage + "/agents/" + s.Agent.ID + "?before=99999999999999999999",
		orgPage + "/agents/" + s.Agent.ID + "?before=-1"} {
		if p := alice.get(t, path); p.Status != http.StatusBadRequest || !strings.Contains(p.Body, "not a page of the list") {
			t.Errorf("GET %s: %d %s; want 400", path, p.Status, p.Body)
		}
	}
	if n := len(supportActivity(t, env, s.Owner)); n != reads {
		t.Errorf("refused pages were recorded: %d reads, want %d", n, reads)
	}
}
