package apitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// An export for a move freezes the organization's agent writes (503 moving) from the moment it
// is requested until the move is completed (410 moved) or the export is cancelled or fails
// (writes go on): nothing is accepted at the source after the archive's snapshot and lost.

// startMoveExport starts an export for a move and returns the transfer.
func startMoveExport(t testing.TB, env *servertest.Env, token, orgID string) (transferJSON, reply) {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodPost, Path: orgPath(orgID) + "/exports", Token: token,
		Header: headers("Idempotency-Key", newKey()), Body: jsonBody(map[string]bool{"for_move": true})})
	var x transferJSON
	if rep.Status == http.StatusAccepted {
		rep.decode(t, &x)
		if !x.ForMove || x.State != "pending" {
			t.Errorf("export for a move started as %s", rep.Body)
		}
	}
	return x, rep
}

// runExport works an export in the test, as its job would.
func runExport(t testing.TB, env *servertest.Env, ctx context.Context, id string) error {
	t.Helper()
	tr, run, err := domain.StartExport(context.Background(), env.Pool, id)
	if err != nil || !run {
		t.Fatalf("start export %s: %v %v", id, run, err)
	}
	return domain.RunExport(ctx, env.Pool, tr, domain.ArchiveSource{PublicURL: env.Config.PublicURL})
}

// expectMoving checks a 503 moving with Retry-After.
func expectMoving(t testing.TB, what string, r reply) {
	t.Helper()
	if r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") != "5" {
		t.Errorf("%s while moving: %d (Retry-After %q) %s, want 503 moving with Retry-After 5", what, r.Status, r.Header.Get("Retry-After"), r.Body)
		return
	}
	r.expectProblem(t, http.StatusServiceUnavailable, "moving")
}

// TestExportForMoveFreezesAgentWrites: while an export for a move is in progress (pending,
// running, succeeded and not completed), registrations, batches, job listings and job results
// answer 503 moving and store nothing; members' writes go on. Cancelling the export, or its
// failing, lifts the freeze; completing the move turns it into 410 moved.
func TestExportForMoveFreezesAgentWrites(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t) // no job workers: the test runs the exports' steps itself
	token := env.Token(t, servertest.AllScopes()...)
	s := newAgentSetup(t, env)
	a := s.Agent
	job := createJob(t, env, s.Owner, a.ID, "uptime")
	if r := a.do(t, http.MethodGet, agentJobsURL, nil); r.Status != http.StatusOK {
		t.Fatalf("jobs: %d %s", r.Status, r.Body)
	}
	result := jsonBody(map[string]any{"status": "succeeded", "exit_code": 0, "output": "up"})

	frozen := func(stage string) {
		t.Helper()
		batch := "frozen-" + newKey()
		expectMoving(t, stage+": batch", a.submit(t, batchBody(batch, 2, 0)))
		if b, o := storedBatch(t, env, a.ID, batch); b != 0 || o != 0 {
			t.Errorf("%s: a refused batch was stored (%d, %d)", stage, b, o)
		}
		expectMoving(t, stage+": registration", send(t, env, registerReq(s.Key, newSpecAgent(env))))
		expectMoving(t, stage+": jobs", a.do(t, http.MethodGet, agentJobsURL, nil))
		expectMoving(t, stage+": job result", a.do(t, http.MethodPost, agentResultURL(job.ID), result))
	}
	open := func(stage string) {
		t.Helper()
		a.submit(t, batchBody("open-"+newKey(), 1, 0)).accepted(t)
		if r := a.do(t, http.MethodGet, agentJobsURL, nil); r.Status != http.StatusOK {
			t.Errorf("%s: jobs: %d %s", stage, r.Status, r.Body)
		}
	}
	open("before")

	// Cancelled while pending: writes go on.
	x, rep := startMoveExport(t, env, token, s.OrgID)
	if rep.Status != http.StatusAccepted {
		t.Fatalf("export for a move: %d %s", rep.Status, rep.Body)
	}
	frozen("pending")
	// One move at a time; an ordinary export is not refused, and freezes nothing more.
	if _, r := startMoveExport(t, env, token, s.OrgID); r.Status != http.StatusConflict {
		t.Errorf("a second export for a move: %d %s, want 409", r.Status, r.Body)
	} else {
		r.expectProblem(t, http.StatusConflict, "invalid_transfer_state")
	}
	plain := startExport(t, env, token, s.OrgID)
	// Members' writes are not frozen.
	createIntakeKey(t, env, env, s.Owner, "during-the-move")
	send(t, env, req{Method: http.MethodPost, Path: transferPath(x.ID) + "/cancel", Token: token}).expectProblemOrOK(t, http.StatusOK)
	open("cancelled")
	send(t, env, req{Method: http.MethodPost, Path: transferPath(plain.ID) + "/cancel", Token: token}).expectProblemOrOK(t, http.StatusOK)

	// Failed while running: writes go on.
	x, _ = startMoveExport(t, env, token, s.OrgID)
	frozen("pending again")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := runExport(t, env, cancelled, x.ID); err == nil {
		t.Fatal("an export without its context succeeded")
	}
	if f, _ := getTransfer(t, env, token, x.ID); f.State != "failed" {
		t.Fatalf("export: %+v, want failed", f)
	}
	open("failed")

	// Succeeded: still frozen until completed, then moved.
	x, _ = startMoveExport(t, env, token, s.OrgID)
	if err := runExport(t, env, context.Background(), x.ID); err != nil {
		t.Fatal(err)
	}
	if f, _ := getTransfer(t, env, token, x.ID); f.State != "succeeded" || !f.ForMove {
		t.Fatalf("export: %+v", f)
	}
	frozen("succeeded")
	send(t, env, req{Method: http.MethodPost, Path: transferPath(x.ID) + "/complete", Token: token}).expectProblemOrOK(t, http.StatusOK)
	a.submit(t, batchBody("after-"+newKey(), 1, 0)).expectProblem(t, http.StatusGone, "moved")
	if n := countRows(t, env, `SELECT count(*) FROM organizations WHERE id = $1 AND moving_transfer_id IS NOT NULL`, s.OrgID); n != 0 {
		t.Error("a completed move left the organization frozen")
	}
}

// TestMoveExportLosesNoBatch: agents send batches as fast as they can while an export for a
// move is requested and written. Every batch answered 202 is in the archive, and no batch
// answered 503 is stored: what the source accepted, it exported.
func TestMoveExportLosesNoBatch(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	token := env.Token(t, servertest.AllScopes()...)
	s := newAgentSetup(t, env)
	agents := []*specAgent{s.Agent}
	for range 3 {
		agents = append(agents, register(t, env, env, s.Key))
	}

	var (
		mu       sync.Mutex
		accepted = map[string]bool{}
		refused  = map[string]bool{}
		wg       sync.WaitGroup
		started  = make(chan struct{})
		once     sync.Once
		finished = make(chan struct{}) // the export was written
	)
	for i, a := range agents {
		wg.Go(func() {
			for n := 0; ; n++ {
				id := fmt.Sprintf("race-%d-%d", i, n)
				r, err := a.doE(http.MethodPost, observationsURL, batchBody(id, 3, 0))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				switch {
				case r.Status == http.StatusAccepted:
					accepted[a.ID+"/"+id] = true
					if len(accepted) >= 40 {
						once.Do(func() { close(started) })
					}
				case r.Status == http.StatusServiceUnavailable && strings.Contains(string(r.Body), `"moving"`):
					refused[a.ID+"/"+id] = true
				default:
					t.Errorf("batch %s: %d %s", id, r.Status, r.Body)
				}
				stop := refused[a.ID+"/"+id]
				mu.Unlock()
				if stop {
					return
				}
				select {
				case <-finished: // one batch sent after the export was written, and never refused
					t.Errorf("agent %d: batches still accepted after the export for a move", i)
					return
				default:
				}
			}
		})
	}
	<-started
	x, rep := startMoveExport(t, env, token, s.OrgID)
	if rep.Status != http.StatusAccepted {
		t.Fatalf("export for a move: %d %s", rep.Status, rep.Body)
	}
	err := runExport(t, env, context.Background(), x.ID)
	close(finished)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}

	archived := map[string]bool{}
	for _, m := range readArchive(t, download(t, env, token, waitTransfer(t, env, token, x.ID))) {
		if !strings.HasPrefix(m.Name, "observation_batches/") {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(m.Data))
		for sc.Scan() {
			var b struct {
				InstallationID string `json:"installation_id"`
				BatchID        string `json:"batch_id"`
			}
			if err := json.Unmarshal(sc.Bytes(), &b); err != nil {
				t.Fatal(err)
			}
			archived[b.InstallationID+"/"+b.BatchID] = true
		}
	}
	for id := range accepted {
		if !archived[id] {
			t.Errorf("batch %s was accepted but is not in the archive: lost in a move", id)
		}
	}
	for id := range refused {
		if archived[id] {
			t.Errorf("batch %s was refused but is in the archive", id)
		}
		if n := countRows(t, env, `SELECT count(*) FROM observation_batches WHERE installation_id || '/' || batch_id = $1`, id); n != 0 {
			t.Errorf("batch %s was refused but stored", id)
		}
	}
	if len(refused) != len(agents) {
		t.Errorf("%d agents saw the freeze, want %d", len(refused), len(agents))
	}
	t.Logf("%d batches accepted and archived, %d refused", len(accepted), len(refused))
}
