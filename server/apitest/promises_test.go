package apitest

import (
	"net/http"
	"testing"

	"renga.dev/renga/server"
	"renga.dev/renga/server/servertest"
)

// TestObservationCapPerBatch: the README's cap of 1,000 observations per batch, at the bound
// and one past it (which stores nothing).
func TestObservationCapPerBatch(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	s := newAgentSetup(t, env)
	if r := s.Agent.submit(t, batchBody("cap-1000", 1000, 10)); r.Status != http.StatusAccepted {
		t.Fatalf("1,000 observations: %d %s", r.Status, r.Body)
	}
	r := s.Agent.submit(t, batchBody("cap-1001", 1001, 10))
	r.expectProblem(t, http.StatusBadRequest, "invalid_request")
	if b, o := storedBatch(t, env, s.Agent.ID, "cap-1001"); b != 0 || o != 0 {
		t.Errorf("the refused batch stored %d batch rows and %d observations", b, o)
	}
	if _, o := storedBatch(t, env, s.Agent.ID, "cap-1000"); o != 1000 {
		t.Errorf("the accepted batch stored %d observations, want 1000", o)
	}
}

// TestRateLimitedWritesAreNotAudited: a 429 is refused before anything is attempted, so the
// audit log has one event per write that got past the rate limit and none for the 429s.
func TestRateLimitedWritesAreNotAudited(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.RateLimitAuthenticated, c.RateLimitAuthenticatedBurst = 0.001, 3 })
	id, token := scopedToken(t, env, "organizations:write")
	served, limited := 0, 0
	for range 6 {
		rep := send(t, env, createReq(token, newKey(), jsonBody(map[string]string{"slug": newSlug(), "display_name": "Limited"})))
		switch rep.Status {
		case http.StatusCreated:
			served++
		case http.StatusTooManyRequests:
			rep.expectProblem(t, http.StatusTooManyRequests, "rate_limited")
			limited++
		default:
			t.Fatalf("create: %d %s", rep.Status, rep.Body)
		}
	}
	if served != 3 || limited != 3 {
		t.Fatalf("%d served and %d limited, want 3 and 3 (burst 3)", served, limited)
	}
	if n := countRows(t, env, `SELECT count(*) FROM audit_events WHERE actor_id = $1`, id); n != served {
		t.Errorf("%d audit events for %d served writes and %d rate-limited ones; want one per served write", n, served, limited)
	}
}
