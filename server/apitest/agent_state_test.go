package apitest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// Agent acceptance (issue 5, RFD 23): the organization's state at registration and intake.

// setOrgState puts an organization in a state directly, as the lifecycle or a transfer would.
func setOrgState(t testing.TB, env *servertest.Env, orgID, state string) {
	t.Helper()
	sql := `UPDATE organizations SET state = $2, purge_after = NULL WHERE id = $1`
	if state == "deletion_pending" {
		sql = `UPDATE organizations SET state = $2, purge_after = now() + interval '30 days' WHERE id = $1`
	}
	if _, err := env.Pool.Exec(context.Background(), sql, orgID, state); err != nil {
		t.Fatal(err)
	}
}

// TestOrganizationStateAtIntake is the state table for registration, intake and the agents'
// job requests: active 201/202/200, suspended and deletion_pending 403 suspended, moved 410
// moved; bad credentials 401 whatever the state. Nothing is stored by a refused request.
func TestOrganizationStateAtIntake(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	s := newAgentSetup(t, env)

	table := []struct {
		state  string
		status int
		code   string
	}{
		{"active", 0, ""},
		{"suspended", http.StatusForbidden, "suspended"},
		{"deletion_pending", http.StatusForbidden, "suspended"},
		{"moved", http.StatusGone, "moved"},
		{"active", 0, ""}, // and back: nothing was lost meanwhile
	}
	for i, tc := range table {
		setOrgState(t, env, s.OrgID, tc.state)
		name := tc.state
		a := newSpecAgent(env)
		batchID := "state-" + itoa(i) + "-" + tc.state
		reg := send(t, env, registerReq(s.Key, a))
		intake := s.Agent.submit(t, batchBody(batchID, 1, 0))
		jobs := s.Agent.do(t, http.MethodGet, agentJobsURL, nil)
		if tc.status == 0 {
			if reg.Status != http.StatusCreated {
				t.Errorf("%s: registration %d %s, want 201", name, reg.Status, reg.Body)
			}
			if intake.Status != http.StatusAccepted {
				t.Errorf("%s: intake %d %s, want 202", name, intake.Status, intake.Body)
			}
			if jobs.Status != http.StatusOK {
				t.Errorf("%s: agent jobs %d %s, want 200", name, jobs.Status, jobs.Body)
			}
			continue
		}
		for what, r := range map[string]reply{"registration": reg, "intake": intake, "agent jobs": jobs} {
			if r.Status != tc.status {
				t.Errorf("%s: %s %d %s, want %d %s", name, what, r.Status, r.Body, tc.status, tc.code)
				continue
			}
			r.expectProblem(t, tc.status, tc.code)
		}
		if n := countRows(t, env, `SELECT count(*) FROM installations WHERE id = $1`, a.ID); n != 0 {
			t.Errorf("%s: the refused registration was stored", name)
		}
		if b, o := storedBatch(t, env, s.Agent.ID, batchID); b != 0 || o != 0 {
			t.Errorf("%s: the refused batch was stored", name)
		}
		// Re-registering a known installation is refused the same way.
		if r := send(t, env, registerReq(s.Key, s.Agent)); r.Status != tc.status {
			t.Errorf("%s: re-registration %d %s, want %d", name, r.Status, r.Body, tc.status)
		}
		// Bad credentials are 401 whatever the state.
		wrongKey := "renga_intake_" + domain.NewSecret()
		agentTrack(env, wrongKey)
		send(t, env, registerReq(wrongKey, newSpecAgent(env))).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
		body := batchBody("forged-"+batchID, 1, 0)
		send(t, env, req{Method: http.MethodPost, Path: observationsURL, Body: body,
			Header: signAs(env, newSpecAgent(env).Priv, s.Agent.ID, http.MethodPost, observationsURL, body, time.Now())}).
			expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	}
	// Nothing accepted before was lost.
	if b, o := storedBatch(t, env, s.Agent.ID, "state-0-active"); b != 1 || o != 1 {
		t.Errorf("batch accepted while active: %d/%d stored", b, o)
	}
}

// TestMovedOrganizationBody: a moved organization's intake endpoints answer 410 with
// {"error": "moved"} as an RFC 9457 problem, for registration with its intake key too.
func TestMovedOrganizationBody(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	s := newAgentSetup(t, env)
	if _, err := env.Pool.Exec(context.Background(), `UPDATE organizations SET state = 'moved', purge_after = NULL WHERE id = $1`, s.OrgID); err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]reply{
		"registration": send(t, env, registerReq(s.Key, newSpecAgent(env))),
		"intake":       s.Agent.submit(t, batchBody("moved", 1, 0)),
	} {
		var body map[string]any
		r.decode(t, &body)
		if r.Status != http.StatusGone || body["error"] != "moved" {
			t.Errorf("%s: %d %s, want 410 with error moved", name, r.Status, r.Body)
		}
		r.problem(t)
	}
}
