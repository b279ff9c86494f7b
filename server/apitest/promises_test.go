package apitest

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// TestObservationCapPerBatch: docs/api.md's cap of 1,000 observations per batch, at the bound
// and one past it (which stores nothing).
// Fails when: the spec allows 1,001 (maxItems raised, gen/ regenerated): "status = 202, want 400
// invalid_request" and "the refused batch stored 1 batch rows and 1001 observations".
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
// Fails when: the pipeline audits a write refused with 429 ("6 audit events for 3 served writes").
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

// TestRetentionForgetsOldBatchesAndObservations: the hourly retention deletes observations past
// observation_retention_days in batches of 5,000 (here 12,000 old rows: three passes), keeps
// the recent ones, and forgets batch IDs after the 30-day deduplication window, so a batch
// resent later is new.
// Fails when: the retention stops after one pass of 5,000 ("7000 old observations left"), or
// keeps batch IDs longer than the window ("a batch resent after the deduplication window is
// still a duplicate").
func TestRetentionForgetsOldBatchesAndObservations(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	s := newAgentSetup(t, env)
	old := batchBody("old-1", 1, 10)
	s.Agent.submit(t, old).accepted(t)
	if r := s.Agent.submit(t, old).accepted(t); !r.Duplicate {
		t.Fatal("a resent batch within the window is not a duplicate")
	}
	ctx := context.Background()
	if _, err := env.Pool.Exec(ctx, `INSERT INTO observations (organization_id, installation_id, batch_id, observed_at, received_at, kind, data)
		SELECT $1, $2, 'ancient', now() - interval '400 days', now() - interval '400 days', 'host.facts', '{}'::jsonb
		FROM generate_series(1, 12000)`, s.OrgID, s.Agent.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Pool.Exec(ctx, `UPDATE observation_batches SET received_at = now() - interval '31 days' WHERE batch_id = 'old-1'`); err != nil {
		t.Fatal(err)
	}
	deleted, err := domain.PurgeOldObservations(ctx, env.Pool, env.Config.PolicyDefaults, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if deleted != 12001 {
		t.Errorf("retention deleted %d rows, want the 12,000 old observations and the one old batch ID", deleted)
	}
	if n := countRows(t, env, `SELECT count(*) FROM observations WHERE batch_id = 'ancient'`); n != 0 {
		t.Errorf("%d old observations left", n)
	}
	if n := countRows(t, env, `SELECT count(*) FROM observations WHERE batch_id = 'old-1'`); n != 1 {
		t.Errorf("the recent observation: %d rows, want 1 (kept)", n)
	}
	if r := s.Agent.submit(t, old).accepted(t); r.Duplicate {
		t.Error("a batch resent after the deduplication window is still a duplicate")
	}
}

// TestOwnerAndIntakeKeyWritesAreAudited: an owner's attempted writes (an intake key created, one
// refused) and an intake key's (an installation registered, one refused) each leave exactly one
// audit event, of that actor, with its operation, outcome and organization; an installation's
// routine traffic (an observation batch, a job result, a refused job result) leaves none.
// Fails when (each tried by editing pipeline.audited): owners (actor type user) are left out
// ("owner's intake key left audit events [], want [user createIntakeKey succeeded ...]"), intake
// keys are left out ("registration left audit events []"), or installations are audited (their
// job result fails with a 500).
func TestOwnerAndIntakeKeyWritesAreAudited(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	orgID, owner := agentOwner(t, env)
	expect := func(what string, r reply, status int, actorType, operation, outcome string) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d %s, want %d", what, r.Status, r.Body, status)
		}
		rows, err := env.Pool.Query(context.Background(), `SELECT actor_type, operation, outcome,
			coalesce(organization_id, '') FROM audit_events WHERE request_id = $1`, r.Header.Get("X-Request-Id"))
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var a, op, out, org string
			if err := rows.Scan(&a, &op, &out, &org); err != nil {
				t.Fatal(err)
			}
			got = append(got, a+" "+op+" "+out+" "+org)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		want := []string{actorType + " " + operation + " " + outcome + " " + orgID}
		if actorType == "" {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s left audit events %q, want %q", what, got, want)
		}
	}

	// The owner's writes.
	rep := send(t, env, req{Method: http.MethodPost, Path: intakeKeysPath, Token: owner,
		Body: jsonBody(map[string]string{"name": "k"}), Header: headers("Idempotency-Key", newKey())})
	var k intakeKeyJSON
	if rep.Status == http.StatusCreated {
		rep.decode(t, &k)
		trackKey(env, k.Key)
	}
	expect("owner's intake key", rep, http.StatusCreated, domain.ActorUser, "createIntakeKey", domain.OutcomeSucceeded)
	expect("owner's refused intake key", send(t, env, req{Method: http.MethodPost, Path: intakeKeysPath, Token: owner,
		Body: jsonBody(map[string]any{"name": 7}), Header: headers("Idempotency-Key", newKey())}),
		http.StatusBadRequest, domain.ActorUser, "createIntakeKey", domain.OutcomeFailed)

	// The intake key's writes.
	a := newSpecAgent(env)
	expect("registration", send(t, env, registerReq(k.Key, a)), http.StatusCreated,
		domain.ActorIntakeKey, "registerInstallation", domain.OutcomeSucceeded)
	bad := registerReq(k.Key, newSpecAgent(env))
	bad.Body = jsonBody(map[string]string{"installation_id": "not an installation ID"})
	expect("refused registration", send(t, env, bad), http.StatusBadRequest,
		domain.ActorIntakeKey, "registerInstallation", domain.OutcomeFailed)

	// The installation's routine traffic.
	expect("observation batch", a.submit(t, batchBody("audited-not", 3, 10)), http.StatusAccepted, "", "", "")
	job := createJob(t, env, owner, a.ID, "uptime")
	expect("job result", a.do(t, http.MethodPost, agentResultURL(job.ID),
		jsonBody(map[string]any{"status": "succeeded", "exit_code": 0, "output": "up"})), http.StatusOK, "", "", "")
	expect("refused job result", a.do(t, http.MethodPost, agentResultURL(job.ID),
		jsonBody(map[string]any{"status": "failed", "exit_code": 1})), http.StatusConflict, "", "", "")
}
