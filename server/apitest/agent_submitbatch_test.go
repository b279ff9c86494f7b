package apitest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"renga.dev/renga/server/db"
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
	obs := json.RawMessage(`{"observations": [{"observed_at": "2026-12-01T00:00:00Z", "kind": "k", "data": {}}]}`)
	batch := func(id string) domain.IntakeBatch {
		return domain.IntakeBatch{OrganizationID: a.OrgID, InstallationID: a.Agent.ID, BatchID: id, Body: obs, Bytes: 100}
	}
	const far = 1 << 40
	if fresh, err := domain.SubmitBatch(ctx, env.Pool, batch("b1"), far, 0); err != nil || !fresh {
		t.Fatalf("active: fresh %v, err %v", fresh, err)
	}
	if fresh, err := domain.SubmitBatch(ctx, env.Pool, batch("b1"), far, 0); err != nil || fresh {
		t.Fatalf("the same batch again: fresh %v, err %v; want a duplicate", fresh, err)
	}
	for state, want := range map[string]error{"suspended": domain.ErrSuspended, "deletion_pending": domain.ErrSuspended, "moved": domain.ErrMoved} {
		if _, err := env.Pool.Exec(ctx, `UPDATE organizations SET state = $2::text, purge_after = CASE WHEN $2::text = 'deletion_pending' THEN now() + interval '1 day' END WHERE id = $1`, a.OrgID, state); err != nil {
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

// TestIntakeAndStateChangesWaitForEachOther: a batch in flight and a change of its
// organization's state (or move freeze) never overlap. A batch that starts while a state change
// is uncommitted waits for it and then sees it; a state change that starts while a batch is in
// flight waits for the batch to commit. Otherwise a batch read as "active" before an export's
// freeze could commit after the archive's snapshot, and be lost in the move. Both waits are
// observed in pg_stat_activity (a backend of this database waiting on a lock), not timed.
//
// Fails when: the intake statement does not hold the organization's row (FOR SHARE dropped: the
// batch is answered while the suspension is uncommitted).
func TestIntakeAndStateChangesWaitForEachOther(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	a := newAgentSetup(t, env)
	ctx := context.Background()
	obs := json.RawMessage(`{"observations": [{"observed_at": "2026-12-01T00:00:00Z", "kind": "k", "data": {}}]}`)
	batch := domain.IntakeBatch{OrganizationID: a.OrgID, InstallationID: a.Agent.ID, Body: obs, Bytes: 100}
	waitForALockWait := func(what string, done <-chan struct{}) {
		t.Helper()
		for range 200 {
			select {
			case <-done:
				t.Fatalf("%s finished without waiting", what)
			default:
			}
			var n int
			if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s never waited for a lock", what)
	}

	// A suspension, uncommitted; then a batch.
	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `UPDATE organizations SET state = 'suspended' WHERE id = $1`, a.OrgID); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var submitErr error
	go func() {
		defer close(done)
		b := batch
		b.BatchID = "during-suspension"
		_, submitErr = domain.SubmitBatch(ctx, env.Pool, b, 1<<40, 0)
	}()
	waitForALockWait("a batch during an uncommitted suspension", done)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if !errors.Is(submitErr, domain.ErrSuspended) {
		t.Fatalf("a batch that waited for a suspension: err %v, want suspended", submitErr)
	}
	if _, err := env.Pool.Exec(ctx, `UPDATE organizations SET state = 'active' WHERE id = $1`, a.OrgID); err != nil {
		t.Fatal(err)
	}

	// A batch in flight (a transaction holding what the intake statement holds until it
	// commits: the organization's row, FOR SHARE); then a move's freeze.
	tx, err = env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM organizations WHERE id = $1 FOR SHARE`, a.OrgID); err != nil {
		t.Fatal(err)
	}
	done = make(chan struct{})
	var freezeErr error
	go func() {
		defer close(done)
		_, freezeErr = env.Pool.Exec(ctx, `UPDATE organizations SET moving_transfer_id = 'xfr_test' WHERE id = $1`, a.OrgID)
	}()
	waitForALockWait("a move's freeze during a batch", done)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	if freezeErr != nil {
		t.Fatal(freezeErr)
	}
	b := batch
	b.BatchID = "after-freeze"
	if _, err := domain.SubmitBatch(ctx, env.Pool, b, 1<<40, 0); !errors.Is(err, domain.ErrMoving) {
		t.Fatalf("a batch after a freeze: err %v, want moving", err)
	}
}

// TestIntakeShardsStayWithinThePool: intake counts each batch on its connection's shard, and a
// shard is the connection's slot in the pool, not its backend: a pool that replaces its
// connections all day (here every few milliseconds) still adds to at most as many counter rows
// per organization and day as it holds connections at once, so each batch's sum of today's
// total reads a bounded number of rows. With shards by backend PID, each replaced connection
// added a row.
func TestIntakeShardsStayWithinThePool(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	a := newAgentSetup(t, env)
	ctx := context.Background()
	sep := "?"
	if strings.Contains(env.DBURL, "?") {
		sep = "&"
	}
	pool, err := db.Open(ctx, env.DBURL+sep+"pool_max_conn_lifetime=20ms&pool_max_conn_lifetime_jitter=0s&pool_health_check_period=10ms", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	pids := map[uint32]bool{}
	for i := range 40 {
		var wg sync.WaitGroup
		for j := range 2 {
			wg.Go(func() {
				b := domain.IntakeBatch{OrganizationID: a.OrgID, InstallationID: a.Agent.ID, BatchID: fmt.Sprintf("b-%d-%d", i, j), Bytes: 100,
					Body: json.RawMessage(`{"observations": [{"observed_at": "2026-12-01T00:00:00Z", "kind": "k", "data": {}}]}`)}
				if _, err := domain.SubmitBatch(ctx, pool, b, 1<<40, 0); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pids[c.Conn().PgConn().PID()] = true
		c.Release()
		time.Sleep(5 * time.Millisecond)
	}
	if len(pids) < 4 {
		t.Fatalf("the pool replaced too few connections to mean anything: %d backends", len(pids))
	}
	var rows, requests int64
	if err := env.Pool.QueryRow(ctx, `SELECT count(*), sum(intake_requests) FROM usage_counters WHERE organization_id = $1 AND intake_requests > 0`, a.OrgID).
		Scan(&rows, &requests); err != nil {
		t.Fatal(err)
	}
	if requests != 80 || rows > 2 {
		t.Errorf("80 batches through %d backends: %d requests counted on %d rows, want 80 on at most 2", len(pids), requests, rows)
	}
}
