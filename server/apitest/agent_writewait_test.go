package apitest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// TestAgentWritesWaitForStateChanges: an agent's job listing, job result and registration that
// start while a suspension, or an export for a move, is uncommitted wait for it and then see
// it (403 suspended, 503 moving), changing nothing. Authentication read the organization
// active before the change committed: only the write's own check, under the organization's row
// lock (domain.BeginWrite), can refuse. The waits are observed in pg_stat_activity, not timed.
// Fails when the write's check is blind to the organization's state or to the freeze (the
// pipeline's first check at authentication cannot see a change committed after it).
func TestAgentWritesWaitForStateChanges(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := context.Background()
	s := newAgentSetup(t, env)
	delivered, queued, result := deliveredAndQueuedJobs(t, env, s)

	changes := []struct {
		name, status string
		code         int
		change       func(tx pgx.Tx) error
	}{
		{"suspension", "suspended", http.StatusForbidden, func(tx pgx.Tx) error {
			_, _, err := domain.SuspendOrganization(ctx, tx, s.OrgID, "race")
			return err
		}},
		{"export for a move", "moving", http.StatusServiceUnavailable, func(tx pgx.Tx) error {
			_, _, err := domain.CreateExport(ctx, tx, s.OrgID, "test", true)
			return err
		}},
	}
	for _, c := range changes {
		fresh := newSpecAgent(env)
		for what, r := range map[string]req{
			"job listing":  {Method: http.MethodGet, Path: agentJobsURL, Header: s.Agent.sign(http.MethodGet, agentJobsURL, nil, time.Now())},
			"job result":   {Method: http.MethodPost, Path: agentResultURL(delivered.ID), Body: result, Header: s.Agent.sign(http.MethodPost, agentResultURL(delivered.ID), result, time.Now())},
			"registration": registerReq(s.Key, fresh),
		} {
			tx, err := env.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tx.Rollback(ctx) }) // before the server closes: a waiting request ends
			if err := c.change(tx); err != nil {
				t.Fatal(err)
			}
			done := make(chan reply, 1)
			go func() {
				rep, err := sendE(env, r)
				if err != nil {
					rep = reply{Status: -1, Body: []byte(err.Error())}
				}
				done <- rep
			}()
			waitFor(t, 20*time.Second, what+" to wait for the "+c.name, func() bool {
				return lockWaits(t, env, "SELECT state, % FROM organizations WHERE id = $1 FOR %") == 1
			})
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			(<-done).expectProblem(t, c.code, c.status)
			// Undone for the next request: active, not frozen.
			if _, err := env.Pool.Exec(ctx, `UPDATE organizations SET state = 'active', suspended_reason = NULL, moving_transfer_id = NULL
				WHERE id = $1`, s.OrgID); err != nil {
				t.Fatal(err)
			}
		}
		if n := countRows(t, env, `SELECT count(*) FROM installations WHERE id = $1`, fresh.ID); n != 0 {
			t.Errorf("%s: a registration that waited for it was stored", c.name)
		}
	}
	for _, j := range listOrgJobs(t, env, s.Owner) {
		if (j.ID == queued.ID && (j.State != "queued" || j.DeliveredAt != nil)) || j.Result != nil || j.CompletedAt != nil {
			t.Errorf("job %s changed by a refused request: %+v", j.ID, j)
		}
	}
}
