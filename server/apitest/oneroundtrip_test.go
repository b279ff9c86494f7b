package apitest

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"renga.dev/renga/server/servertest"
)

// TestOneRoundTripCreateAnswersWhatItsChecksRefused: a create is sent in one round trip
// (x-renga-one-round-trip) with checks in place of BeginWrite's reads. What a check refuses is
// answered as the two-round-trip write answers it, and nothing is written twice:
//   - the same request again under its key is the stored response, byte for byte, and one
//     organization;
//   - another request under the key is 409 idempotency_key_reused, audited, nothing created;
//   - a slug in use (the insert after the checks fails) is 409 slug_taken, audited, in the one
//     round trip and the failure's audit, the token not looked up again (the checks passed);
//   - a token revoked after the server cached it: TestRevokedKnownTokenIsRefusedLikeAnUnknownOne.
//
// Fails when: a refused check is answered as an error of its own (a 500, a 400 for the refusal
// it makes), a replay creates again, or a failed insert is taken for a refused token.
func TestOneRoundTripCreateAnswersWhatItsChecksRefused(t *testing.T) {
	t.Parallel()
	trace := &servertest.RoundTrips{}
	env := servertest.StartTraced(t, trace)
	tokenID, token := scopedToken(t, env, "organizations:write")
	createOrg(t, env, token, newSlug(), "Known") // the server has seen the token

	key, slug := newKey(), newSlug()
	body := jsonBody(map[string]string{"slug": slug, "display_name": "Once"})
	first := send(t, env, createReq(token, key, body))
	if first.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", first.Status, first.Body)
	}
	var again reply
	trips := trace.During(func() { again = send(t, env, createReq(token, key, body)) })
	if again.Status != http.StatusCreated || !bytes.Equal(again.Body, first.Body) ||
		again.Header.Get("Location") != first.Header.Get("Location") || again.Header.Get("ETag") != first.Header.Get("ETag") {
		t.Errorf("replay: %d %s %v, want the stored 201 %s %v", again.Status, again.Body, again.Header, first.Body, first.Header)
	}
	if n := countRows(t, env, `SELECT count(*) FROM organizations WHERE slug = $1`, slug); n != 1 {
		t.Errorf("%d organizations %s after the replay, want 1", n, slug)
	}
	if len(trips) < 2 || !begins(trips[:1]) || trips[0].SQL[0] == "BEGIN" || trips[1].SQL[0] != "BEGIN" {
		t.Errorf("replay's round trips %q: want the refused one, then BEGIN with the stored result's read", trips)
	}

	orgs := countRows(t, env, `SELECT count(*) FROM organizations`)
	reused := send(t, env, createReq(token, key, jsonBody(map[string]string{"slug": newSlug(), "display_name": "Other"})))
	reused.expectProblem(t, http.StatusConflict, "idempotency_key_reused")
	expectOneAudit(t, env, reused, "createOrganization", "failed", tokenID, "", "idempotency_key_reused")
	if n := countRows(t, env, `SELECT count(*) FROM organizations`); n != orgs {
		t.Errorf("%d organizations after a reused key, want %d", n, orgs)
	}

	var taken reply
	trips = trace.During(func() {
		taken = send(t, env, createReq(token, newKey(), jsonBody(map[string]string{"slug": slug, "display_name": "Twice"})))
	})
	taken.expectProblem(t, http.StatusConflict, "slug_taken")
	expectOneAudit(t, env, taken, "createOrganization", "failed", tokenID, "", "slug_taken")
	if readsTokenByHash(trips) || len(trips) != 2 || trips[0].SQL[0] == "BEGIN" {
		t.Errorf("slug taken: round trips %q, want the one round trip and the failure's audit, no lookup", trips)
	}
	if n := countRows(t, env, `SELECT count(*) FROM organizations`); n != orgs {
		t.Errorf("%d organizations after a slug taken, want %d", n, orgs)
	}
	var stored int
	if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM idempotency_keys WHERE actor_id = $1`, tokenID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 2 { // "Known" and the first create; nothing for the refusals
		t.Errorf("%d results stored for the token, want 2", stored)
	}
}
