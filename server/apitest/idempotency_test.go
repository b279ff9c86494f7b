package apitest

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// createReq is a keyed POST /organizations.
func createReq(token, key string, body []byte) req {
	r := req{Method: http.MethodPost, Path: orgsPath, Token: token, Body: body, Header: http.Header{}}
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	return r
}

// storedKeys counts the idempotency records of an actor.
func storedKeys(t testing.TB, env *servertest.Env, actorID string) int {
	t.Helper()
	return countRows(t, env, `SELECT count(*) FROM idempotency_keys WHERE actor_id = $1`, actorID)
}

func TestIdempotencyConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:write")
	key := newKey()
	body := jsonBody(map[string]string{"slug": "concurrent", "display_name": "Concurrent"})

	const n = 64
	replies := make([]reply, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i], errs[i] = sendE(env, createReq(token, key, body))
		}()
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	replayed := 0
	for i, r := range replies {
		if r.Status != http.StatusCreated {
			t.Errorf("reply %d: status %d %s", i, r.Status, r.Body)
		}
		if !bytes.Equal(r.Body, replies[0].Body) {
			t.Errorf("reply %d differs from reply 0:\n%s\n%s", i, r.Body, replies[0].Body)
		}
		if r.Header.Get("Idempotency-Expires") == "" {
			t.Errorf("reply %d has no Idempotency-Expires", i)
		}
		if r.Header.Get("Idempotent-Replayed") == "true" {
			replayed++
		}
	}
	// Exactly one request executes; every other one waits for it and replays its result.
	if replayed != n-1 {
		t.Errorf("%d replies carry Idempotent-Replayed: true, want %d", replayed, n-1)
	}
	if got := countRows(t, env, `SELECT count(*) FROM organizations`); got != 1 {
		t.Errorf("%d organizations exist, want 1", got)
	}
	if got := countRows(t, env, `SELECT count(*) FROM audit_events WHERE operation = 'createOrganization' AND outcome = 'succeeded'`); got != 1 {
		t.Errorf("%d succeeded createOrganization audit events, want 1", got)
	}
	if got := countRows(t, env, `SELECT count(*) FROM idempotency_keys`); got != 1 {
		t.Errorf("%d idempotency records, want 1", got)
	}
	var o organization
	replies[0].decode(t, &o)
	if o.Slug != "concurrent" || o.Version != 1 {
		t.Errorf("created organization = %+v", o)
	}
	for i, r := range replies {
		if r.Header.Get("Location") != orgPath(o.ID) || r.Header.Get("ETag") != `"1"` {
			t.Errorf("reply %d: Location %q, ETag %q", i, r.Header.Get("Location"), r.Header.Get("ETag"))
		}
	}
}

func TestIdempotencyKeyRules(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := context.Background()
	aID, a := scopedToken(t, env, "organizations:write")
	_, b := scopedToken(t, env, "organizations:write")
	key := newKey()
	body := jsonBody(map[string]string{"slug": "acme", "display_name": "Acme"})

	before := time.Now()
	first := send(t, env, createReq(a, key, body))
	if first.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", first.Status, first.Body)
	}
	if first.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("first execution carries Idempotent-Replayed: %q", first.Header.Get("Idempotent-Replayed"))
	}

	t.Run("expires header is RFC 3339, at least 24h ahead", func(t *testing.T) {
		v := first.Header.Get("Idempotency-Expires")
		exp, err := time.Parse(time.RFC3339, v)
		if err != nil {
			t.Fatalf("Idempotency-Expires %q is not RFC 3339: %v", v, err)
		}
		// The header has whole seconds; allow for the truncation of the sub-second part.
		if min := before.Add(24 * time.Hour).Truncate(time.Second); exp.Before(min) {
			t.Errorf("Idempotency-Expires %s is less than 24h after the request (%s)", exp, before)
		}
		if exp.After(time.Now().Add(31 * 24 * time.Hour)) {
			t.Errorf("Idempotency-Expires %s is implausibly far ahead", exp)
		}
	})

	t.Run("same key, same request replays byte for byte", func(t *testing.T) {
		// Insignificant whitespace and key order do not make a different request.
		again := send(t, env, createReq(a, key, []byte(`{ "display_name": "Acme",  "slug": "acme" }`)))
		if again.Status != http.StatusCreated || !bytes.Equal(again.Body, first.Body) {
			t.Fatalf("replay: %d %s, want 201 %s", again.Status, again.Body, first.Body)
		}
		if again.Header.Get("Idempotent-Replayed") != "true" {
			t.Error("replay lacks Idempotent-Replayed: true")
		}
		for _, h := range []string{"Location", "ETag", "Idempotency-Expires", "Content-Type"} {
			if again.Header.Get(h) != first.Header.Get(h) {
				t.Errorf("replayed %s = %q, first %q", h, again.Header.Get(h), first.Header.Get(h))
			}
		}
	})

	t.Run("same key, different request is 409", func(t *testing.T) {
		other := jsonBody(map[string]string{"slug": "acme", "display_name": "Acme Two"})
		send(t, env, createReq(a, key, other)).expectProblem(t, http.StatusConflict, "idempotency_key_reused")
		if n := countRows(t, env, `SELECT count(*) FROM organizations`); n != 1 {
			t.Errorf("%d organizations, want 1", n)
		}
	})

	t.Run("another token's key is its own", func(t *testing.T) {
		// The same key and body from another token execute (and meet the existing slug).
		r := send(t, env, createReq(b, key, body))
		r.expectProblem(t, http.StatusConflict, "slug_taken")
		if r.Header.Get("Idempotent-Replayed") != "" {
			t.Errorf("another token's request was a replay: Idempotent-Replayed %q", r.Header.Get("Idempotent-Replayed"))
		}
	})

	t.Run("a failed attempt stores nothing", func(t *testing.T) {
		k := newKey()
		dup := jsonBody(map[string]string{"slug": "acme", "display_name": "Dup"})
		send(t, env, createReq(a, k, dup)).expectProblem(t, http.StatusConflict, "slug_taken")
		if n := countRows(t, env, `SELECT count(*) FROM idempotency_keys WHERE key_hash = $1`, domain.HashSecret(k)); n != 0 {
			t.Errorf("a failed attempt stored %d idempotency records", n)
		}
		// So the same key with another request executes afresh.
		r := send(t, env, createReq(a, k, jsonBody(map[string]string{"slug": "acme-two", "display_name": "Dup"})))
		if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" {
			t.Errorf("retry after a failure: %d replayed=%q %s", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
		}
	})

	t.Run("a key is scoped to its route and request", func(t *testing.T) {
		k := newKey()
		o := createOrg(t, env, a, "scoped", "Scoped")
		other := createOrg(t, env, a, "scoped-other", "Other")
		// The create key namespace does not hold k: a PATCH with it executes.
		p := patchReq(a, o.ID, `"1"`, "Scoped Inc.")
		p.Header.Set("Idempotency-Key", k)
		first := send(t, env, p)
		if first.Status != http.StatusOK || first.Header.Get("Idempotent-Replayed") != "" || first.Header.Get("Idempotency-Expires") == "" {
			t.Fatalf("keyed PATCH: %d replayed=%q expires=%q %s", first.Status, first.Header.Get("Idempotent-Replayed"),
				first.Header.Get("Idempotency-Expires"), first.Body)
		}
		// A retry of the successful PATCH replays it, although If-Match "1" is stale by now.
		again := send(t, env, p)
		if again.Status != http.StatusOK || again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, first.Body) ||
			again.Header.Get("ETag") != `"2"` {
			t.Errorf("retried keyed PATCH: %d replayed=%q ETag %q %s", again.Status, again.Header.Get("Idempotent-Replayed"),
				again.Header.Get("ETag"), again.Body)
		}
		// The same key on another organization is a different request of the same route.
		p2 := patchReq(a, other.ID, `"1"`, "Scoped Inc.")
		p2.Header.Set("Idempotency-Key", k)
		send(t, env, p2).expectProblem(t, http.StatusConflict, "idempotency_key_reused")
		if o2, _ := getOrg(t, env, a, other.ID); o2.Version != 1 {
			t.Errorf("the reused key changed the other organization: %+v", o2)
		}
		// So is another If-Match.
		p3 := patchReq(a, o.ID, `"2"`, "Scoped Inc.")
		p3.Header.Set("Idempotency-Key", k)
		send(t, env, p3).expectProblem(t, http.StatusConflict, "idempotency_key_reused")
	})

	t.Run("missing key on create is 400", func(t *testing.T) {
		body := jsonBody(map[string]string{"slug": "no-key", "display_name": "No key"})
		send(t, env, createReq(a, "", body)).expectProblem(t, http.StatusBadRequest, "idempotency_key_required")
		if n := countRows(t, env, `SELECT count(*) FROM organizations WHERE slug = 'no-key'`); n != 0 {
			t.Error("a create without a key executed")
		}
	})

	t.Run("quoted structured-field key equals the bare key", func(t *testing.T) {
		body := jsonBody(map[string]string{"slug": "quoted", "display_name": "Quoted"})
		bare := send(t, env, createReq(a, "abc", body))
		if bare.Status != http.StatusCreated {
			t.Fatalf("bare key: %d %s", bare.Status, bare.Body)
		}
		quoted := send(t, env, createReq(a, `"abc"`, body))
		if quoted.Status != http.StatusCreated || quoted.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(quoted.Body, bare.Body) {
			t.Errorf(`key "abc" after abc: %d replayed=%q %s`, quoted.Status, quoted.Header.Get("Idempotent-Replayed"), quoted.Body)
		}
		// And the other way round.
		body2 := jsonBody(map[string]string{"slug": "quoted-two", "display_name": "Quoted"})
		q2 := send(t, env, createReq(a, `"xyz"`, body2))
		b2 := send(t, env, createReq(a, "xyz", body2))
		if q2.Status != http.StatusCreated || b2.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(q2.Body, b2.Body) {
			t.Errorf(`key xyz after "xyz": %d/%d replayed=%q`, q2.Status, b2.Status, b2.Header.Get("Idempotent-Replayed"))
		}
	})

	t.Run("a revoked token cannot replay", func(t *testing.T) {
		cTok, c := mintToken(t, env, domain.NewToken{Scopes: []string{"organizations:write"}})
		k := newKey()
		body := jsonBody(map[string]string{"slug": "revoked-later", "display_name": "R"})
		if r := send(t, env, createReq(c, k, body)); r.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.Status, r.Body)
		}
		if _, err := domain.RevokeToken(ctx, env.Pool, cTok.ID); err != nil {
			t.Fatal(err)
		}
		r := send(t, env, createReq(c, k, body))
		r.expectProblem(t, http.StatusUnauthorized, "unauthenticated")
		if r.Header.Get("Idempotent-Replayed") != "" {
			t.Error("a revoked token got a replay")
		}
	})

	t.Run("retention forgets expired keys, which then execute afresh", func(t *testing.T) {
		held := storedKeys(t, env, aID)
		if held < 2 {
			t.Fatalf("token a holds %d idempotency records, want at least 2", held)
		}
		tag, err := env.Pool.Exec(ctx, `UPDATE idempotency_keys SET expires_at = now() - interval '1 second'
			WHERE actor_id = $1 AND key_hash = $2`, aID, domain.HashSecret(key))
		if err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("expire the key: %v (%d rows)", err, tag.RowsAffected())
		}
		n, err := domain.PurgeExpiredIdempotencyKeys(ctx, env.Pool)
		if err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("purge removed %d records, want 1", n)
		}
		if got := countRows(t, env, `SELECT count(*) FROM idempotency_keys WHERE key_hash = $1 AND actor_id = $2`, domain.HashSecret(key), aID); got != 0 {
			t.Error("the expired record is still there")
		}
		if got := storedKeys(t, env, aID); got != held-1 {
			t.Errorf("after the purge token a holds %d records, want %d (unexpired ones stay)", got, held-1)
		}
		// The key is free again: a different request with it executes instead of 409.
		r := send(t, env, createReq(a, key, jsonBody(map[string]string{"slug": "after-purge", "display_name": "Fresh"})))
		if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" {
			t.Errorf("key after purge: %d replayed=%q %s", r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
		}
	})
}

// TestIdempotencyKeyBodilessResponse: a keyed write whose success has no body (204) is stored
// and answered like any other.
func TestIdempotencyKeyBodilessResponse(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	tok, secret := mintToken(t, env, domain.NewToken{Scopes: []string{"audit:read"}})
	r := send(t, env, req{Method: http.MethodPost, Path: selfPath + "/revoke", Token: secret, Header: headers("Idempotency-Key", newKey())})
	if r.Status != http.StatusNoContent {
		t.Errorf("keyed revokeTokenSelf: %d %s, want 204", r.Status, r.Body)
	}
	if r.Status < 300 && r.Header.Get("Idempotency-Expires") == "" {
		t.Error("keyed 204 lacks Idempotency-Expires")
	}
	got, err := domain.TokenByID(context.Background(), env.Pool, tok.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.RevokedAt == nil {
		t.Error("keyed revokeTokenSelf did not revoke the token")
	}
	if n := storedKeys(t, env, tok.ID); n != 1 {
		t.Errorf("%d idempotency records for the keyed revoke, want 1", n)
	}
}
