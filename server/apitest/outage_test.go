package apitest

import (
	"context"
	"net/http"
	"net/url"
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
	for _, sql := range []string{
		`ALTER DATABASE ` + pgx.Identifier{name}.Sanitize() + ` ALLOW_CONNECTIONS false`,
		`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '` + name + `'`,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	return restore
}
