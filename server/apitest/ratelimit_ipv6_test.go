package apitest

import (
	"net/http"
	"testing"

	"renga.dev/renga/server"
	"renga.dev/renga/server/servertest"
)

// TestAnonymousLimitPerIPv6Network: unauthenticated requests are limited per source address,
// and an IPv6 source's bucket is its /64 (one network's addresses share it; another network has
// its own), an IPv4 source's its address. Fails when IPv6 sources share one bucket, or each
// address of a network has its own.
func TestAnonymousLimitPerIPv6Network(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, trustProxies("127.0.0.0/8"), func(c *server.Config) {
		c.RateLimitAnonymous, c.RateLimitAnonymousBurst = 0.001, 2
	})
	accept := func(from string) reply {
		t.Helper()
		return send(t, env, req{Method: http.MethodPost, Path: "/api/v1/invitations/accept", Header: headers("X-Forwarded-For", from),
			Body: jsonBody(map[string]string{"token": "renga_invite_" + random(26), "display_name": "x"})})
	}
	for range 2 {
		accept("2001:db8:1:1::1").expectProblem(t, http.StatusNotFound, "not_found")
	}
	accept("2001:db8:1:1::1").expectProblem(t, http.StatusTooManyRequests, "rate_limited")
	accept("2001:db8:1:1::2").expectProblem(t, http.StatusTooManyRequests, "rate_limited") // the same /64
	accept("2001:db8:1:2::1").expectProblem(t, http.StatusNotFound, "not_found")           // another /64
	accept("203.0.113.9").expectProblem(t, http.StatusNotFound, "not_found")
}
