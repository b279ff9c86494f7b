package apitest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// TestSubmitBatchChecksTheOrganizationInItsStatement calls the intake's domain function
// directly, past the pipeline's check of the organization's state at authentication: the one
// statement must itself refuse a suspended or moved organization and store nothing.
func TestSubmitBatchChecksTheOrganizationInItsStatement(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	a := newAgentSetup(t, env)
	ctx := context.Background()
	obs := json.RawMessage(`[{"observed_at": "2026-12-01T00:00:00Z", "kind": "k", "data": {}}]`)
	batch := func(id string) domain.IntakeBatch {
		return domain.IntakeBatch{OrganizationID: a.OrgID, InstallationID: a.Agent.ID, BatchID: id, Observations: obs, Bytes: 100}
	}
	const far = 1 << 40
	if fresh, err := domain.SubmitBatch(ctx, env.Pool, batch("b1"), far, 0); err != nil || !fresh {
		t.Fatalf("active: fresh %v, err %v", fresh, err)
	}
	if fresh, err := domain.SubmitBatch(ctx, env.Pool, batch("b1"), far, 0); err != nil || fresh {
		t.Fatalf("the same batch again: fresh %v, err %v; want a duplicate", fresh, err)
	}
	for state, want := range map[string]error{"suspended": domain.ErrSuspended, "deletion_pending": domain.ErrSuspended, "moved": domain.ErrMoved} {
		if _, err := env.Pool.Exec(ctx, `UPDATE organizations SET state = $2, purge_after = CASE WHEN $2 = 'deletion_pending' THEN now() + interval '1 day' END WHERE id = $1`, a.OrgID, state); err != nil {
			t.Fatal(err)
		}
		for _, margin := range []int64{0, far} { // the one statement, and the near-limit transaction
			if _, err := domain.SubmitBatch(ctx, env.Pool, batch("b-"+state), far, margin); !errors.Is(err, want) {
				t.Errorf("%s, margin %d: err %v, want %v", state, margin, err, want)
			}
			if b, o := storedBatch(t, env, a.Agent.ID, "b-"+state); b != 0 || o != 0 {
				t.Errorf("%s: stored %d batches, %d observations", state, b, o)
			}
		}
	}
	if _, err := env.Pool.Exec(ctx, `UPDATE organizations SET state = 'active', purge_after = NULL WHERE id = $1`, a.OrgID); err != nil {
		t.Fatal(err)
	}

	// Near the limit (here: always, margin >= limit), the transaction's exact check: 100 bytes
	// are in today; a limit of 250 takes one more batch of 100, not two; a batch accepted
	// before is still a duplicate when over the limit.
	if fresh, err := domain.SubmitBatch(ctx, env.Pool, batch("b2"), 250, 250); err != nil || !fresh {
		t.Fatalf("within the limit: fresh %v, err %v", fresh, err)
	}
	var limited *domain.DailyLimitError
	if _, err := domain.SubmitBatch(ctx, env.Pool, batch("b3"), 250, 250); !errors.As(err, &limited) || limited.Value != 250 {
		t.Errorf("over the limit: err %v, want a DailyLimitError of 250", err)
	}
	if fresh, err := domain.SubmitBatch(ctx, env.Pool, batch("b2"), 250, 250); err != nil || fresh {
		t.Errorf("a batch accepted before, over the limit: fresh %v, err %v; want a duplicate", fresh, err)
	}
	if fresh, err := domain.SubmitBatch(ctx, env.Pool, batch("b1"), 250, 0); err != nil || fresh {
		t.Errorf("a duplicate far from nothing: fresh %v, err %v", fresh, err)
	}
	if b, _ := storedBatch(t, env, a.Agent.ID, "b3"); b != 0 {
		t.Error("the batch over the limit was stored")
	}
	var requests, bytes int64
	if err := env.Pool.QueryRow(ctx, `SELECT sum(intake_requests), sum(intake_bytes) FROM usage_counters WHERE organization_id = $1`,
		a.OrgID).Scan(&requests, &bytes); err != nil {
		t.Fatal(err)
	}
	if requests != 2 || bytes != 200 {
		t.Errorf("usage: %d requests, %d bytes; want 2 and 200 (each new batch once)", requests, bytes)
	}
}
