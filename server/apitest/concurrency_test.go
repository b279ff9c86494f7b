package apitest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// TestConcurrentAcceptances: one invitation accepted by 10 at once is redeemed once; 16
// invitations accepted at once against max_users = 3 make exactly 3 owners.
func TestConcurrentAcceptances(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:write", "policies:write")
	o := createOrg(t, env, token, newSlug(), "Concurrent")
	inv := invite(t, env, token, o.ID, "one@example.com")
	secret := outboxSecret(t, env, o.ID, inv.ID)
	env.Track(secret)
	statuses := parallel(10, func(int) reply { return send(t, env, acceptReq(secret, "One")) })
	if n := count(statuses, http.StatusCreated); n != 1 {
		t.Fatalf("one invitation accepted %d times: %v", n, codes(statuses))
	}
	for _, r := range statuses {
		if r.Status == http.StatusCreated {
			var a acceptedJSON
			r.decode(t, &a)
			env.Track(a.APIKey)
		} else {
			r.expectProblem(t, http.StatusGone, "invitation_accepted")
		}
	}

	putPolicy(t, env, token, o.ID, `"1"`, map[string]any{"limits": map[string]any{"max_users": 3}}).expectProblemOrOK(t, http.StatusOK)
	var secrets []string
	for i := 0; i < 16; i++ {
		inv := invite(t, env, token, o.ID, fmt.Sprintf("u%d@example.com", i))
		s := outboxSecret(t, env, o.ID, inv.ID)
		env.Track(s)
		secrets = append(secrets, s)
	}
	results := parallel(16, func(i int) reply { return send(t, env, acceptReq(secrets[i], "U")) })
	for _, r := range results {
		if r.Status == http.StatusCreated {
			var a acceptedJSON
			r.decode(t, &a)
			env.Track(a.APIKey)
		} else {
			r.expectProblem(t, http.StatusForbidden, "limit_exceeded")
		}
	}
	if n := countRows(t, env, `SELECT count(*) FROM memberships WHERE organization_id = $1`, o.ID); n != 3 {
		t.Errorf("members = %d, want max_users = 3 (%v)", n, codes(results))
	}
}

// TestNoDeadlocks: the pairs of writers that once took locks in opposite orders (acceptance or
// revocation against a re-invitation of the same address) all complete without a 5xx, and who
// won each race decides the invitation's final state (accepted, or revoked with the accept 410).
// Fails when: a revocation also revokes an accepted invitation (its UPDATE without `state =
// 'pending'`): "pair 0: accept 201, re-invite 201, final state revoked".
func TestNoDeadlocks(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:write")
	o := createOrg(t, env, token, newSlug(), "Locks")
	for i := 0; i < 40; i++ {
		email := fmt.Sprintf("pair%d@example.com", i)
		inv := invite(t, env, token, o.ID, email)
		secret := outboxSecret(t, env, o.ID, inv.ID)
		env.Track(secret)
		var first reply
		if i%2 == 0 {
			first = send(t, env, acceptReq(secret, "P"))
		}
		pair := parallel(2, func(j int) reply {
			switch {
			case j == 0 && i%2 == 0:
				return send(t, env, inviteReq(token, o.ID, email, newKey()))
			case j == 0:
				return send(t, env, acceptReq(secret, "P"))
			default:
				return send(t, env, req{Method: http.MethodDelete, Path: invitationPath(o.ID, inv.ID), Token: token})
			}
		})
		replies := pair
		if i%2 == 0 {
			replies = append(replies, first)
		}
		for _, r := range replies {
			if r.Status >= 500 {
				t.Fatalf("pair %d: %d %s", i, r.Status, r.Body)
			}
			if r.Status == http.StatusCreated && r.Header.Get("Location") == "" {
				var a acceptedJSON
				r.decode(t, &a)
				env.Track(a.APIKey)
			}
		}
		// Who won decides the invitation's final state, and nothing else can.
		var got struct {
			State string `json:"state"`
		}
		send(t, env, req{Method: http.MethodGet, Path: invitationPath(o.ID, inv.ID), Token: token}).decode(t, &got)
		revoke := pair[1]
		if revoke.Status != http.StatusOK {
			t.Fatalf("pair %d: revoke %d %s (revoking is success whatever the state)", i, revoke.Status, revoke.Body)
		}
		switch {
		case i%2 == 0: // accepted first; then a re-invite and a revoke race
			if first.Status != http.StatusCreated || pair[0].Status != http.StatusCreated || got.State != "accepted" {
				t.Fatalf("pair %d: accept %d, re-invite %d, final state %s; want 201, 201, accepted", i, first.Status, pair[0].Status, got.State)
			}
		case pair[0].Status == http.StatusCreated: // the accept won the race with the revoke
			if got.State != "accepted" {
				t.Fatalf("pair %d: the accept won but the invitation is %s", i, got.State)
			}
		default: // the revoke won: the accept is refused as revoked
			pair[0].expectProblem(t, http.StatusGone, "invitation_revoked")
			if got.State != "revoked" {
				t.Fatalf("pair %d: the revoke won but the invitation is %s", i, got.State)
			}
		}
	}
}

// TestOwnerWriteWaitsForSuspension: a member's write in flight while the organization is being
// suspended does not land after the suspension: it waits, then answers 403 suspended.
func TestOwnerWriteWaitsForSuspension(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:write")
	o := createOrg(t, env, token, newSlug(), "Race")
	owner := addOwner(t, env, token, o.ID, "race@example.com", "Race")
	ctx := context.Background()
	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, _, err := domain.SuspendOrganization(ctx, tx, o.ID, "race"); err != nil {
		t.Fatal(err)
	}
	done := make(chan reply, 1)
	go func() { done <- send(t, env, settingsReq(owner.APIKey, `"1"`, map[string]any{"require_mfa": true})) }()
	select {
	case r := <-done:
		t.Fatalf("the owner's write did not wait for the suspension in progress: %d %s", r.Status, r.Body)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	(<-done).expectProblem(t, http.StatusForbidden, "suspended")
	if s, _ := getSettings(t, env, owner.APIKey); s.RequireMFA || s.Version != 1 {
		t.Errorf("settings changed on a suspended organization: %+v", s)
	}
}

// TestPurgingOrganizationRefusesWrites: once purging, no write lands (409 purge_started).
func TestPurgingOrganizationRefusesWrites(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:write", "policies:write")
	o := createOrg(t, env, token, newSlug(), "Purging")
	if _, err := env.Pool.Exec(context.Background(), `UPDATE organizations SET state = 'purging' WHERE id = $1`, o.ID); err != nil {
		t.Fatal(err)
	}
	send(t, env, putPolicyReq(token, o.ID, `"1"`, map[string]any{})).expectProblem(t, http.StatusConflict, "purge_started")
	send(t, env, req{Method: http.MethodPatch, Path: orgPath(o.ID), Token: token,
		Body: jsonBody(map[string]string{"display_name": "x"}), Header: headers("If-Match", `"1"`)}).expectProblem(t, http.StatusConflict, "purge_started")
	send(t, env, inviteReq(token, o.ID, "late@example.com", newKey())).expectProblem(t, http.StatusConflict, "invalid_state")
}

// TestUsageDatesOutOfRange: dates PostgreSQL cannot hold are 400s, not 500s.
func TestUsageDatesOutOfRange(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "usage:read", "organizations:write")
	o := createOrg(t, env, token, newSlug(), "Dates")
	for _, path := range []string{orgPath(o.ID) + "/usage?from=0000-01-01&to=0000-01-02", "/api/v1/operator/usage?from=0000-01-01&to=0000-01-02"} {
		send(t, env, req{Method: http.MethodGet, Path: path, Token: token}).expectProblem(t, http.StatusBadRequest, "invalid_request")
	}
}

// TestPeriodicPurgeWithTwoJobClients: two servers' River clients on one database run the
// periodic purge; the organization is purged once.
func TestPeriodicPurgeWithTwoJobClients(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.DeletionGracePeriod = 0; c.PurgeInterval = time.Second })
	second, err := server.New(env.Config, env.Pool, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(second.Handler())
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithCancel(context.Background())
	if err := second.StartJobs(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx, stop := context.WithTimeout(context.Background(), 10*time.Second)
		defer stop()
		_ = second.StopJobs(stopCtx)
		cancel()
	})
	env.StartJobs(t)
	_, token := scopedToken(t, env, "organizations:write")
	var ids []string
	for i := 0; i < 5; i++ {
		o := createOrg(t, env, token, newSlug(), "Gone")
		send(t, env, req{Method: http.MethodPost, Path: orgPath(o.ID) + "/deletion", Token: token}).expectProblemOrOK(t, http.StatusOK)
		ids = append(ids, o.ID)
	}
	waitFor(t, 30*time.Second, "the periodic purge", func() bool {
		return countRows(t, env, `SELECT count(*) FROM organizations WHERE id = ANY($1)`, ids) == 0
	})
	if n := countRows(t, env, `SELECT count(*) FROM audit_events WHERE operation = 'purgeOrganization' AND organization_id = ANY($1)`, ids); n != 5 {
		t.Errorf("purge audit events = %d, want one per organization (5)", n)
	}
}

func parallel(n int, f func(i int) reply) []reply {
	out := make([]reply, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = f(i)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

func count(rs []reply, status int) int {
	n := 0
	for _, r := range rs {
		if r.Status == status {
			n++
		}
	}
	return n
}

func codes(rs []reply) []int {
	var out []int
	for _, r := range rs {
		out = append(out, r.Status)
	}
	return out
}
