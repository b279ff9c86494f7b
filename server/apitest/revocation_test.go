package apitest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// TestRevocationDuringAWrite: a write whose token is revoked before the write commits does
// not land. The revocation holds the token row while the write is in flight; the write waits
// for it, sees the token revoked, and answers 401 with nothing changed.
func TestRevocationDuringAWrite(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	tokenID, token := scopedToken(t, env, "organizations:write")
	o := createOrg(t, env, token, newSlug(), "Before")
	ctx := context.Background()

	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// The revocation (as a release command or another request would make it), not yet committed.
	if _, err := domain.RevokeToken(ctx, tx, tokenID); err != nil {
		t.Fatal(err)
	}
	done := make(chan reply, 1)
	go func() {
		done <- send(t, env, req{Method: http.MethodPatch, Path: orgPath(o.ID), Token: token,
			Body: jsonBody(map[string]string{"display_name": "After"}), Header: headers("If-Match", `"1"`)})
	}()
	select {
	case r := <-done:
		t.Fatalf("the write did not wait for the revocation in progress: %d %s", r.Status, r.Body)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	r.expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	var name string
	if err := env.Pool.QueryRow(ctx, `SELECT display_name FROM organizations WHERE id = $1`, o.ID).Scan(&name); err != nil || name != "Before" {
		t.Errorf("display_name = %q (%v), want Before", name, err)
	}
}

// TestConcurrentSelfRevocations: a token revoking itself from several requests at once never
// deadlocks: one revokes, the others find it revoked (401), each attempt is audited.
// Fails when: the pipeline leaves a successful 204 write out of the audit ("0 succeeded").
func TestConcurrentSelfRevocations(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	for i := 0; i < 10; i++ {
		tokenID, token := scopedToken(t, env, "organizations:read")
		rs := parallel(6, func(int) reply {
			return send(t, env, req{Method: http.MethodPost, Path: "/api/v1/operator/tokens/self/revoke", Token: token})
		})
		if n := count(rs, http.StatusNoContent); n < 1 || n+count(rs, http.StatusUnauthorized) != len(rs) {
			t.Fatalf("self-revocations: %v", codes(rs))
		}
		// Every attempt that got past authentication is audited (a 401 at the door is not): each
		// 204 as succeeded, and an attempt that authenticated but found the token revoked in its
		// transaction as a 401; nothing else.
		succeeded := countRows(t, env, `SELECT count(*) FROM audit_events WHERE actor_id = $1 AND outcome = 'succeeded' AND status = 204`, tokenID)
		refused := countRows(t, env, `SELECT count(*) FROM audit_events WHERE actor_id = $1 AND outcome <> 'succeeded' AND status = 401`, tokenID)
		all := countRows(t, env, `SELECT count(*) FROM audit_events WHERE actor_id = $1`, tokenID)
		if succeeded != count(rs, http.StatusNoContent) || refused > count(rs, http.StatusUnauthorized) || all != succeeded+refused {
			t.Errorf("audit events for %s: %d succeeded, %d refused with 401, %d in all; answers %v", tokenID, succeeded, refused, all, codes(rs))
		}
	}
}
