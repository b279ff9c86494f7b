package apitest

import (
	"net/http"
	"testing"

	"renga.dev/renga/server/servertest"
)

// TestAgentJobTrafficDuringAFreeze: while an export for a move freezes an organization, its
// agents' job traffic and registrations answer 503 moving (with Retry-After) and change
// nothing: a queued job is not delivered by a listing, a delivered job's result is not
// recorded, no installation is registered (new or known). Once the export is cancelled the same
// requests go through. Job traffic and registration are agents' writes: the write's transaction
// checks the freeze under the organization's row lock (domain.BeginWrite), the only check on
// their path. Fails when that check is blind to the freeze (write.go), or a listing marks jobs
// delivered, or a result is stored, before it refuses.
func TestAgentJobTrafficDuringAFreeze(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t) // no job workers: the export for the move stays pending
	token := env.Token(t, servertest.AllScopes()...)
	s := newAgentSetup(t, env)
	delivered, queued, result := deliveredAndQueuedJobs(t, env, s)

	x, rep := startMoveExport(t, env, token, s.OrgID)
	if rep.Status != http.StatusAccepted {
		t.Fatalf("export for a move: %d %s", rep.Status, rep.Body)
	}
	expectMoving(t, "job listing", s.Agent.do(t, http.MethodGet, agentJobsURL, nil))
	expectMoving(t, "job result", s.Agent.do(t, http.MethodPost, agentResultURL(delivered.ID), result))
	fresh := newSpecAgent(env)
	expectMoving(t, "registration", send(t, env, registerReq(s.Key, fresh)))
	expectMoving(t, "re-registration", send(t, env, registerReq(s.Key, s.Agent)))
	states := map[string]string{}
	for _, j := range listOrgJobs(t, env, s.Owner) {
		states[j.ID] = j.State
		if (j.ID == queued.ID && j.DeliveredAt != nil) || j.Result != nil || j.CompletedAt != nil {
			t.Errorf("job %s changed during the freeze: %+v", j.ID, j)
		}
	}
	if states[delivered.ID] != "delivered" || states[queued.ID] != "queued" {
		t.Errorf("jobs during the freeze: %v; want %s delivered, %s queued", states, delivered.ID, queued.ID)
	}
	if n := countRows(t, env, `SELECT count(*) FROM installations WHERE id = $1`, fresh.ID); n != 0 {
		t.Error("a registration refused during the freeze was stored")
	}

	// Cancelled: the same requests go through.
	send(t, env, req{Method: http.MethodPost, Path: transferPath(x.ID) + "/cancel", Token: token}).expectProblemOrOK(t, http.StatusOK)
	var listed struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	r := s.Agent.do(t, http.MethodGet, agentJobsURL, nil)
	if r.Status == http.StatusOK {
		r.decode(t, &listed)
	}
	if r.Status != http.StatusOK || len(listed.Items) != 2 || listed.Items[1].ID != queued.ID {
		t.Errorf("job listing after the freeze: %d %s; want both jobs, the queued one last", r.Status, r.Body)
	}
	if r := s.Agent.do(t, http.MethodPost, agentResultURL(delivered.ID), result); r.Status != http.StatusOK {
		t.Errorf("job result after the freeze: %d %s", r.Status, r.Body)
	}
	if r := send(t, env, registerReq(s.Key, fresh)); r.Status != http.StatusCreated {
		t.Errorf("registration after the freeze: %d %s", r.Status, r.Body)
	}
}

// deliveredAndQueuedJobs gives s's agent two jobs, the first delivered (listed once) and the
// second still queued, and the body of a result for the delivered one.
func deliveredAndQueuedJobs(t *testing.T, env *servertest.Env, s agentSetup) (delivered, queued jobJSON, result []byte) {
	t.Helper()
	delivered = createJob(t, env, s.Owner, s.Agent.ID, "uptime")
	if r := s.Agent.do(t, http.MethodGet, agentJobsURL, nil); r.Status != http.StatusOK {
		t.Fatalf("jobs: %d %s", r.Status, r.Body)
	}
	queued = createJob(t, env, s.Owner, s.Agent.ID, "uptime")
	return delivered, queued, jsonBody(map[string]any{"status": "succeeded", "exit_code": 0, "output": "up"})
}
