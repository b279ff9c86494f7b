package apitest

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// changedFields is what the audit event of r's request names as changed.
func changedFields(t *testing.T, env *servertest.Env, r reply) []string {
	t.Helper()
	events := auditByRequest(t, env, r.Header.Get("X-Request-Id"))
	if len(events) != 1 {
		t.Fatalf("request %d %s left %d audit events, want 1", r.Status, r.Body, len(events))
	}
	return events[0].ChangedFields
}

// TestMoveEndsNameWhatChanged: completing a move changes the transfer and the organization's
// state (moved), and its audit event names both; cancelling an export for a move changes its
// state and lifts the freeze, and its event names the state; each again is a success that
// changed nothing, and its event names nothing. Fails when an end of a move reports less than
// it changed, or a change where there was none.
func TestMoveEndsNameWhatChanged(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t) // no job workers: the test runs the export itself
	token := env.Token(t, servertest.AllScopes()...)
	s := newAgentSetup(t, env)

	cancelled, rep := startMoveExport(t, env, token, s.OrgID)
	if rep.Status != http.StatusAccepted {
		t.Fatalf("export for a move: %d %s", rep.Status, rep.Body)
	}
	for i, want := range [][]string{{"state"}, nil} {
		r := send(t, env, req{Method: http.MethodPost, Path: transferPath(cancelled.ID) + "/cancel", Token: token})
		if r.Status != http.StatusOK {
			t.Fatalf("cancel #%d: %d %s", i+1, r.Status, r.Body)
		}
		if got := changedFields(t, env, r); !slices.Equal(got, want) {
			t.Errorf("cancel #%d: audit event's changed fields %v, want %v", i+1, got, want)
		}
	}
	s.Agent.submit(t, batchBody("after-the-cancel", 1, 0)).accepted(t)

	x, _ := startMoveExport(t, env, token, s.OrgID)
	if err := runExport(t, env, context.Background(), x.ID); err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]string{{"transfer", "state"}, nil} {
		r := send(t, env, req{Method: http.MethodPost, Path: transferPath(x.ID) + "/complete", Token: token})
		if r.Status != http.StatusOK {
			t.Fatalf("complete #%d: %d %s", i+1, r.Status, r.Body)
		}
		if got := changedFields(t, env, r); !slices.Equal(got, want) {
			t.Errorf("complete #%d: audit event's changed fields %v, want %v", i+1, got, want)
		}
	}
	s.Agent.submit(t, batchBody("after-the-move", 1, 0)).expectProblem(t, http.StatusGone, "moved")
}

// TestTransferChangeSeesTheOneBeforeIt: a cancel that starts while the move's completion is
// uncommitted waits for it (on the organization's row) and then sees the transfer as the
// completion left it: 409 invalid_transfer_state, and the move stays completed. The wait is
// observed in pg_stat_activity, not timed. Fails when a change of a transfer decides from the
// transfer as it read it before waiting (a completed move cancelled, its archive deleted).
func TestTransferChangeSeesTheOneBeforeIt(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := context.Background()
	token := env.Token(t, servertest.AllScopes()...)
	s := newAgentSetup(t, env)
	x, rep := startMoveExport(t, env, token, s.OrgID)
	if rep.Status != http.StatusAccepted {
		t.Fatalf("export for a move: %d %s", rep.Status, rep.Body)
	}
	if err := runExport(t, env, ctx, x.ID); err != nil {
		t.Fatal(err)
	}

	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) }) // before the server closes: a waiting request ends
	if _, _, _, err := domain.CompleteTransfer(ctx, tx, x.ID, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan reply, 1)
	go func() {
		r, err := sendE(env, req{Method: http.MethodPost, Path: transferPath(x.ID) + "/cancel", Token: token})
		if err != nil {
			r = reply{Status: -1, Body: []byte(err.Error())}
		}
		done <- r
	}()
	waitFor(t, 20*time.Second, "the cancel to wait for the completion", func() bool {
		return lockWaits(t, env, "SELECT % FROM organizations WHERE id = $1 FOR NO KEY UPDATE") == 1
	})
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	(<-done).expectProblem(t, http.StatusConflict, "invalid_transfer_state")
	if f, _ := getTransfer(t, env, token, x.ID); f.State != "succeeded" {
		t.Errorf("the completed move's export after the cancel: %+v, want succeeded", f)
	}
	if n := countRows(t, env, `SELECT count(*) FROM transfers WHERE id = $1 AND completed_at IS NOT NULL AND sha256 IS NOT NULL`, x.ID); n != 1 {
		t.Error("the completed move lost its completion or its archive")
	}
	if n := countRows(t, env, `SELECT count(*) FROM organizations WHERE id = $1 AND state = 'moved'`, s.OrgID); n != 1 {
		t.Error("the organization is not moved")
	}
}
