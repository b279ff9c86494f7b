package apitest

import (
	"net/http"
	"testing"

	"renga.dev/renga/server"
	"renga.dev/renga/server/servertest"
)

func TestRateLimits(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.RateLimitAuthenticated, c.RateLimitAuthenticatedBurst = 0.001, 3
		c.RateLimitAnonymous, c.RateLimitAnonymousBurst = 0.001, 2
	})
	_, token := scopedToken(t, env, "organizations:read")
	for i := 0; i < 3; i++ {
		send(t, env, req{Method: http.MethodGet, Path: orgsPath, Token: token}).expectProblemOrOK(t, http.StatusOK)
	}
	limited := send(t, env, req{Method: http.MethodGet, Path: orgsPath, Token: token})
	limited.expectProblem(t, http.StatusTooManyRequests, "rate_limited")
	if limited.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	// Another token has its own bucket.
	_, other := scopedToken(t, env, "organizations:read")
	send(t, env, req{Method: http.MethodGet, Path: orgsPath, Token: other}).expectProblemOrOK(t, http.StatusOK)

	// Failed authentication is limited per source address: guessing is slow.
	for i := 0; i < 2; i++ {
		send(t, env, req{Method: http.MethodGet, Path: orgsPath, Token: "renga_operator_guess"}).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	}
	send(t, env, req{Method: http.MethodGet, Path: orgsPath, Token: "renga_operator_guess"}).expectProblem(t, http.StatusTooManyRequests, "rate_limited")
}

func TestMethodNotAllowedListsAllowedMethods(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:read")
	r := send(t, env, req{Method: http.MethodDelete, Path: orgsPath, Token: token})
	r.expectProblem(t, http.StatusMethodNotAllowed, "method_not_allowed")
	if got := r.Header.Get("Allow"); got != "GET, POST" {
		t.Errorf("Allow = %q, want GET, POST", got)
	}
}

// expectProblemOrOK fails unless the status is want.
func (r reply) expectProblemOrOK(t testing.TB, want int) {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status %d, want %d: %s", r.Status, want, r.Body)
	}
}

// TestInvitationAcceptanceIsRateLimited: the unauthenticated acceptance is limited per source
// address, whatever the token sent.
func TestInvitationAcceptanceIsRateLimited(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.RateLimitAnonymous, c.RateLimitAnonymousBurst = 0.001, 2 })
	body := func() []byte {
		return jsonBody(map[string]string{"token": "renga_invite_" + random(26), "display_name": "x"})
	}
	for i := 0; i < 2; i++ {
		send(t, env, req{Method: http.MethodPost, Path: "/api/v1/invitations/accept", Body: body()}).expectProblem(t, http.StatusNotFound, "not_found")
	}
	r := send(t, env, req{Method: http.MethodPost, Path: "/api/v1/invitations/accept", Body: body()})
	r.expectProblem(t, http.StatusTooManyRequests, "rate_limited")
	if r.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
}
