package apitest

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server"
	"renga.dev/renga/server/servertest"
)

// TestDatabaseOutageIs503: while the database takes no connections (its backends terminated,
// new ones refused), a request with a valid token is 503 unavailable with Retry-After, never a
// 401 that would tell the client its token is bad; a write too; readiness fails; the home
// request, which needs no database, still answers. Once the database is back, requests succeed.
func TestDatabaseOutageIs503(t *testing.T) {
	// Unauthenticated requests and failed authentications: 2 per address, then 429.
	env := servertest.Start(t, func(c *server.Config) { c.RateLimitAnonymous, c.RateLimitAnonymousBurst = 0.001, 2 })
	token := env.Token(t, "organizations:write")
	org := createOrg(t, env, token, "outage", "Outage")
	restore := cutDatabase(t, env)

	for _, r := range []req{
		{Method: http.MethodGet, Path: orgPath(org.ID), Token: token},
		{Method: http.MethodGet, Path: orgPath(org.ID), Token: token}, // again: the pool's reconnect fails too
		createReq(token, newKey(), jsonBody(map[string]string{"slug": "during", "display_name": "During"})),
	} {
		got := send(t, env, r)
		got.expectProblem(t, http.StatusServiceUnavailable, "unavailable")
		if got.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: 503 without Retry-After", r.Method, r.Path)
		}
	}
	if got := send(t, env, req{Method: http.MethodGet, Path: "/readyz"}); got.Status != http.StatusServiceUnavailable {
		t.Errorf("readyz during the outage: %d", got.Status)
	}
	if got := send(t, env, req{Method: http.MethodGet, Path: "/api/v1/agent/home"}); got.Status != http.StatusOK {
		t.Errorf("home during the outage: %d %s", got.Status, got.Body)
	}

	restore()
	// The outage's 503s did not count as failed authentications: the address still has its
	// second request (the home request took the first), and a bad token is a 401, not a 429.
	send(t, env, req{Method: http.MethodGet, Path: orgPath(org.ID), Token: "renga_operator_" + strings.Repeat("a", 52)}).
		expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := send(t, env, req{Method: http.MethodGet, Path: orgPath(org.ID), Token: token})
		if got.Status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the database came back: %d %s", got.Status, got.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cutDatabase makes the test server's database take no connections (its backends terminated,
// new ones refused) until the returned restore, which also runs when the test ends.
func cutDatabase(t *testing.T, env *servertest.Env) (restore func()) {
	t.Helper()
	ctx := context.Background()
	u, err := url.Parse(env.DBURL)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	u.Path = "/postgres" // the cluster's maintenance database: a database cannot refuse its own connections
	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(ctx) }) // after restore (cleanups run last first)
	restore = func() {
		if _, err := admin.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{name}.Sanitize()+` ALLOW_CONNECTIONS true`); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(restore) // before the harness's own checks, which need the database
	// Backends waiting for a lock go first, and are gone (the timeout waits for each to exit)
	// before the rest: were the lock's holder terminated first, a waiter could take the lock and
	// commit in the moment before its own termination, and a test of the outage would see its
	// statement succeed.
	for _, sql := range []string{
		`ALTER DATABASE ` + pgx.Identifier{name}.Sanitize() + ` ALLOW_CONNECTIONS false`,
		`SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity WHERE datname = '` + name + `' AND wait_event_type = 'Lock'`,
		`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '` + name + `'`,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	return restore
}

// TestIntakeDuringAnOutageIs503: agents whose keys the server has cached (one batch each
// before) send batches at once while the database takes no connections: each is 503 with
// Retry-After (grouped or alone), never a 401 that would tell the agent its key is bad nor a
// 400; nothing is stored. Once the database is back, the same batches are accepted as new.
func TestIntakeDuringAnOutageIs503(t *testing.T) {
	env := servertest.Start(t)
	agents := []agentSetup{newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env)}
	signed := func(a agentSetup, id string) req {
		b := batchBody(id, 2, 200)
		return req{Method: http.MethodPost, Path: observationsURL, Body: b, Header: a.Agent.sign(http.MethodPost, observationsURL, b, time.Now())}
	}
	for i, a := range agents {
		if r := send(t, env, signed(a, "before")); r.Status != http.StatusAccepted {
			t.Fatalf("agent %d before the outage: %d %s", i, r.Status, r.Body)
		}
	}
	statementsBefore := metric(t, env, "renga_intake_statements_total")
	restore := cutDatabase(t, env)
	const perAgent = 8
	reqs := make([]req, 0, len(agents)*perAgent)
	for _, a := range agents {
		for j := range perAgent {
			reqs = append(reqs, signed(a, "during-"+strconv.Itoa(j)))
		}
	}
	replies := make([]reply, len(reqs))
	errs := make([]error, len(reqs))
	parallelDo(len(reqs), func(i int) { replies[i], errs[i] = sendE(env, reqs[i]) })
	for i, r := range replies {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		r.expectProblem(t, http.StatusServiceUnavailable, "unavailable")
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("batch %d: 503 without Retry-After", i)
		}
	}
	// An outage is every batch's: a group that meets it is not sent again batch by batch.
	if n := metric(t, env, "renga_intake_statements_total") - statementsBefore; n > float64(len(reqs)) {
		t.Errorf("%v intake statements for %d batches during the outage", n, len(reqs))
	}
	restore()
	deadline := time.Now().Add(10 * time.Second)
	for i, a := range agents {
		for j := range perAgent {
			for {
				r := send(t, env, signed(a, "during-"+strconv.Itoa(j)))
				if r.Status == http.StatusAccepted {
					if strings.Contains(string(r.Body), `"duplicate":true`) {
						t.Errorf("agent %d, batch %d: a duplicate after the outage: it was stored during it", i, j)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("agent %d, batch %d after the database came back: %d %s", i, j, r.Status, r.Body)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

// metric reads one unlabelled sample from the server's /metrics.
func metric(t *testing.T, env *servertest.Env, name string) float64 {
	t.Helper()
	r := send(t, env, req{Method: http.MethodGet, Path: "/metrics"})
	for _, line := range strings.Split(string(r.Body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}
