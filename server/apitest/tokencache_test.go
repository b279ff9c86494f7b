package apitest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

func readsTokenByHash(trips []servertest.RoundTrip) bool {
	for _, trip := range trips {
		for _, s := range trip.SQL {
			if strings.Contains(s, "FROM operator_tokens WHERE token_hash") {
				return true
			}
		}
	}
	return false
}

// TestKnownTokenWritesInTwoRoundTrips: an operator's write with a token the server has seen
// skips the token's lookup. A create (x-renga-one-round-trip) is one round trip, one implicit
// transaction: the token's lock and re-check, the key's lock and check, the create, its stored
// result and audit event, no BEGIN or COMMIT; a write whose handler reads (an update) is BEGIN
// with the token's re-check and the key, the handler's statements, then the rest and COMMIT.
// The token's first request looks it up.
// Fails when: writes look their token up on every request, or a create takes more round trips.
func TestKnownTokenWritesInTwoRoundTrips(t *testing.T) {
	t.Parallel()
	trace := &servertest.RoundTrips{}
	env := servertest.StartTraced(t, trace)
	token := env.Token(t, "organizations:write")
	create := func(slug string) {
		r := send(t, env, createReq(token, newKey(), jsonBody(map[string]string{"slug": slug, "display_name": slug})))
		if r.Status != http.StatusCreated {
			t.Fatalf("create %s: %d %s", slug, r.Status, r.Body)
		}
	}
	first := trace.During(func() { create("first-write") })
	if len(first) != 2 || !readsTokenByHash(first[:1]) {
		t.Errorf("the token's first write: %d round trips %q, want 2, the lookup first", len(first), first)
	}
	second := trace.During(func() { create("second-write") })
	if len(second) != 1 || readsTokenByHash(second) {
		t.Errorf("a known token's create: %d round trips %q, want 1 without the lookup", len(second), second)
	}
	if len(second) == 1 && (!strings.HasPrefix(second[0].SQL[0], "SELECT pg_advisory_xact_lock_shared(") || slices.Contains(second[0].SQL, "BEGIN") ||
		slices.Contains(second[0].SQL, "COMMIT") || !strings.Contains(strings.Join(second[0].SQL, "\n"), "INSERT INTO organizations")) {
		t.Errorf("a create's round trip %q: want the token's lock first, the insert, no BEGIN or COMMIT", second)
	}
	var made organization
	send(t, env, createReq(token, newKey(), jsonBody(map[string]string{"slug": "updated", "display_name": "Updated"}))).decode(t, &made)
	update := trace.During(func() {
		r := send(t, env, req{Method: http.MethodPatch, Path: orgPath(made.ID), Token: token,
			Body: jsonBody(map[string]string{"display_name": "Updated again"}), Header: headers("Idempotency-Key", newKey(), "If-Match", `"1"`)})
		if r.Status != http.StatusOK {
			t.Fatalf("update: %d %s", r.Status, r.Body)
		}
	})
	if len(update) < 2 || readsTokenByHash(update) || update[0].SQL[0] != "BEGIN" || update[len(update)-1].SQL[len(update[len(update)-1].SQL)-1] != "COMMIT" {
		t.Errorf("a known token's update: round trips %q, want BEGIN first and COMMIT last, without the lookup", update)
	}
	// Reads still look the token up, with their read.
	var o struct {
		ID string `json:"id"`
	}
	created := send(t, env, createReq(token, newKey(), jsonBody(map[string]string{"slug": "read-back", "display_name": "Read back"})))
	created.decode(t, &o)
	readToken := env.Token(t, "organizations:read")
	for range 2 {
		read := trace.During(func() {
			if r := send(t, env, req{Method: http.MethodGet, Path: orgPath(o.ID), Token: readToken}); r.Status != http.StatusOK {
				t.Fatalf("read: %d %s", r.Status, r.Body)
			}
		})
		if len(read) != 1 || !readsTokenByHash(read) {
			t.Errorf("a read: %d round trips %q, want 1 with the token's lookup", len(read), read)
		}
	}
}

// TestRevokedKnownTokenIsRefusedLikeAnUnknownOne: a token the server has seen, then revoked or
// expired elsewhere (another server, a release command), is refused on its next write as if it
// had been looked up: 401 before anything else the request lacks (scope, body, key), nothing
// changed, nothing audited, and WWW-Authenticate names the scheme.
// Fails when: a write trusts the cache without the transaction's re-check, or a request refused
// before its transaction is answered from the cache (400, 403 or 428 to a revoked token).
func TestRevokedKnownTokenIsRefusedLikeAnUnknownOne(t *testing.T) {
	t.Parallel()
	trace := &servertest.RoundTrips{}
	env := servertest.StartTraced(t, trace)
	ctx := context.Background()
	invalidate := map[string]func(id string){
		"revoked": func(id string) {
			if _, err := domain.RevokeToken(ctx, env.Pool, id); err != nil {
				t.Fatal(err)
			}
		},
		"expired": func(id string) {
			if _, err := env.Pool.Exec(ctx, `UPDATE operator_tokens SET expires_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}
		},
	}
	for how, invalidate := range invalidate {
		requests := map[string]func(token string) req{
			"valid create": func(token string) req {
				return createReq(token, newKey(), jsonBody(map[string]string{"slug": "after-" + how, "display_name": "After"}))
			},
			"invalid body": func(token string) req {
				return createReq(token, newKey(), jsonBody(map[string]any{"slug": 7}))
			},
			"missing key": func(token string) req {
				return createReq(token, "", jsonBody(map[string]string{"slug": "no-key-" + how, "display_name": "No key"}))
			},
			"missing scope": func(token string) req {
				return req{Method: http.MethodPut, Path: policyPath("org_00000000000000000000000000"), Token: token,
					Body: jsonBody(map[string]any{}), Header: headers("Idempotency-Key", newKey(), "If-Match", `"1"`)}
			},
		}
		for name, request := range requests {
			tokenID, token := scopedToken(t, env, "organizations:write")
			createOrg(t, env, token, newSlug(), "Known") // the server has seen the token
			audited := countRows(t, env, `SELECT count(*) FROM audit_events WHERE actor_id = $1`, tokenID)
			orgs := countRows(t, env, `SELECT count(*) FROM organizations`)
			invalidate(tokenID)
			for i := range 2 { // refused, then refused again once out of the cache: looked up
				trips := trace.During(func() {
					r := send(t, env, request(token))
					r.expectProblem(t, http.StatusUnauthorized, "unauthenticated")
					if r.Header.Get("WWW-Authenticate") == "" {
						t.Errorf("%s token, %s: 401 without WWW-Authenticate", how, name)
					}
				})
				if i == 1 && (!readsTokenByHash(trips) || begins(trips)) {
					t.Errorf("%s token, %s, once refused: round trips %q, want its lookup and no transaction", how, name, trips)
				}
			}
			if n := loggedWithActor(t, env, tokenID, http.StatusUnauthorized); n != 0 {
				t.Errorf("%s token, %s: %d access log lines of a 401 name the token as the actor", how, name, n)
			}
			if n := countRows(t, env, `SELECT count(*) FROM audit_events WHERE actor_id = $1`, tokenID); n != audited {
				t.Errorf("%s token, %s: %d audit events, want %d (a refused credential is not an actor)", how, name, n, audited)
			}
			if n := countRows(t, env, `SELECT count(*) FROM organizations`); n != orgs {
				t.Errorf("%s token, %s: %d organizations, want %d", how, name, n, orgs)
			}
		}
	}
}

// TestKnownTokenFromAnotherAddressIsLookedUp: a token the server has seen from an allowed
// address is refused from another one, as its lookup would refuse it.
func TestKnownTokenFromAnotherAddressIsLookedUp(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, trustProxies("127.0.0.0/8", "::1/128"))
	_, token, err := domain.CreateToken(context.Background(), env.Pool, domain.NewToken{Name: "sourced",
		Scopes: []string{"organizations:write"}, AllowedSources: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24")}})
	if err != nil {
		t.Fatal(err)
	}
	env.Track(token)
	from := func(addr string) req {
		r := createReq(token, newKey(), jsonBody(map[string]string{"slug": newSlug(), "display_name": "Sourced"}))
		r.Header.Set("X-Forwarded-For", addr)
		return r
	}
	if r := send(t, env, from("198.51.100.7")); r.Status != http.StatusCreated {
		t.Fatalf("from an allowed address: %d %s", r.Status, r.Body)
	}
	send(t, env, from("203.0.113.9")).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	if r := send(t, env, from("198.51.100.8")); r.Status != http.StatusCreated {
		t.Fatalf("from an allowed address again: %d %s", r.Status, r.Body)
	}
}

func begins(trips []servertest.RoundTrip) bool {
	for _, trip := range trips {
		// BEGIN, or a write in one round trip: the token's lock first, no BEGIN.
		if len(trip.SQL) > 0 && (trip.SQL[0] == "BEGIN" || strings.HasPrefix(trip.SQL[0], "SELECT pg_advisory_xact_lock")) {
			return true
		}
	}
	return false
}

// loggedWithActor counts the access log's lines with status that name actor.
func loggedWithActor(t *testing.T, env *servertest.Env, actor string, status int) int {
	t.Helper()
	n := 0
	for _, line := range strings.Split(env.Logs.String(), "\n") {
		var l struct {
			Msg    string `json:"msg"`
			Status int    `json:"status"`
			Actor  string `json:"actor"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "request" && l.Status == status && l.Actor == actor {
			n++
		}
	}
	return n
}

// TestKnownTokenOverItsRateLimitIsRefusedWhenRevoked: a revoked token still in the cache, over
// its rate limit, is told 401, not 429 (which would say it was once valid).
func TestKnownTokenOverItsRateLimitIsRefusedWhenRevoked(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.RateLimitAuthenticated, c.RateLimitAuthenticatedBurst = 0.001, 1 })
	tokenID, token := scopedToken(t, env, "organizations:write")
	createOrg(t, env, token, newSlug(), "Known") // the burst, and the server has seen the token
	over := send(t, env, createReq(token, newKey(), jsonBody(map[string]string{"slug": newSlug(), "display_name": "Over"})))
	over.expectProblem(t, http.StatusTooManyRequests, "rate_limited") // still valid: 429
	if _, err := domain.RevokeToken(context.Background(), env.Pool, tokenID); err != nil {
		t.Fatal(err)
	}
	send(t, env, createReq(token, newKey(), jsonBody(map[string]string{"slug": newSlug(), "display_name": "Revoked"}))).
		expectProblem(t, http.StatusUnauthorized, "unauthenticated")
}

// TestKnownTokenDuringAnOutageIs503: with the database unreachable, a request with a cached
// token that the pipeline would refuse before its transaction is a 503 with Retry-After (its
// token cannot be confirmed), not the 400 its body deserves.
func TestKnownTokenDuringAnOutageIs503(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	token := env.Token(t, "organizations:write")
	createOrg(t, env, token, newSlug(), "Known")
	cutDatabase(t, env)
	for _, r := range []req{
		createReq(token, newKey(), jsonBody(map[string]any{"slug": 7})),
		createReq(token, newKey(), jsonBody(map[string]string{"slug": newSlug(), "display_name": "During"})),
	} {
		got := send(t, env, r)
		got.expectProblem(t, http.StatusServiceUnavailable, "unavailable")
		if got.Header.Get("Retry-After") == "" {
			t.Errorf("503 without Retry-After: %s", got.Body)
		}
	}
}

// TestKnownTokenWriteThatTimesOutIsAudited: a write whose deadline passes while its token's lock
// is held (a revocation in progress that does not commit) is a 503, audited as the attempt of
// its actor, as it is when its token was looked up.
func TestKnownTokenWriteThatTimesOutIsAudited(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.RequestTimeout = 500 * time.Millisecond })
	tokenID, token := scopedToken(t, env, "organizations:write")
	createOrg(t, env, token, newSlug(), "Known")
	ctx := context.Background()
	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, domain.TokenLockKey(tokenID)); err != nil {
		t.Fatal(err)
	}
	r := send(t, env, createReq(token, newKey(), jsonBody(map[string]string{"slug": newSlug(), "display_name": "Late"})))
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r.expectProblem(t, http.StatusServiceUnavailable, "unavailable")
	if n := countRows(t, env, `SELECT count(*) FROM audit_events WHERE actor_id = $1 AND status = 503`, tokenID); n != 1 {
		t.Errorf("audit events of the timed-out write: %d, want 1", n)
	}
}
