package apitest

import (
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"renga.dev/renga/server/servertest"
)

// Agent acceptance (issue 5, RFD 23): max_agents, intake_bytes_per_day, max_jobs_per_day and the
// jobs entitlement each block with their documented code, and nothing already stored is lost;
// the jobs flow end to end.

// jobJSON is a job as the API shows it.
type jobJSON struct {
	ID             string  `json:"id"`
	InstallationID string  `json:"installation_id"`
	Command        string  `json:"command"`
	State          string  `json:"state"`
	CreatedAt      string  `json:"created_at"`
	DeliveredAt    *string `json:"delivered_at"`
	CompletedAt    *string `json:"completed_at"`
	Result         *struct {
		Status   string `json:"status"`
		ExitCode *int   `json:"exit_code"`
		Output   string `json:"output"`
	} `json:"result"`
}

func createJobReq(owner, installationID, command string) req {
	return req{Method: http.MethodPost, Path: orgJobsPath, Token: owner, Header: headers("Idempotency-Key", newKey()),
		Body: jsonBody(map[string]string{"installation_id": installationID, "command": command})}
}

// createJob queues a job as an owner and fails the test unless it is created.
func createJob(t testing.TB, env *servertest.Env, owner, installationID, command string) jobJSON {
	t.Helper()
	rep := send(t, env, createJobReq(owner, installationID, command))
	if rep.Status != http.StatusCreated {
		t.Fatalf("create job: %d %s", rep.Status, rep.Body)
	}
	var j jobJSON
	rep.decode(t, &j)
	return j
}

func listOrgJobs(t testing.TB, env *servertest.Env, owner string) []jobJSON {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodGet, Path: orgJobsPath, Token: owner})
	if rep.Status != http.StatusOK {
		t.Fatalf("list jobs: %d %s", rep.Status, rep.Body)
	}
	var l struct {
		Items []jobJSON `json:"items"`
	}
	rep.decode(t, &l)
	return l.Items
}

// expectUntilMidnight checks a daily limit's Retry-After: the seconds to the next UTC midnight.
func expectUntilMidnight(t testing.TB, r reply) {
	t.Helper()
	got, err := strconv.Atoi(r.Header.Get("Retry-After"))
	now := time.Now().UTC()
	want := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Sub(now).Seconds()
	if err != nil || float64(got) < want-10 || float64(got) > want+10 {
		t.Errorf("Retry-After = %q, want about %.0f (seconds to the next UTC midnight)", r.Header.Get("Retry-After"), want)
	}
}

// TestMaxAgents: past max_agents a new installation is 403 limit_exceeded and nothing is stored;
// the registered one re-registers and keeps working.
func TestMaxAgents(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, policies := scopedToken(t, env, "policies:write")
	s := newAgentSetup(t, env)
	setPolicy(t, env, policies, s.OrgID, map[string]any{"limits": map[string]any{"max_agents": 1}})

	extra := newSpecAgent(env)
	send(t, env, registerReq(s.Key, extra)).expectProblem(t, http.StatusForbidden, "limit_exceeded")
	if n := countRows(t, env, `SELECT count(*) FROM installations WHERE organization_id = $1`, s.OrgID); n != 1 {
		t.Errorf("installations = %d, want 1", n)
	}
	if n := countRows(t, env, `SELECT count(*) FROM installations WHERE id = $1`, extra.ID); n != 0 {
		t.Error("the refused installation was stored")
	}
	// The one registered re-registers (200) and keeps sending.
	if r := send(t, env, registerReq(s.Key, s.Agent)); r.Status != http.StatusOK {
		t.Errorf("re-registration at the limit: %d %s", r.Status, r.Body)
	}
	s.Agent.submit(t, batchBody("at-limit", 1, 0)).accepted(t)
	// Raising the limit lets the refused installation in.
	setPolicy(t, env, policies, s.OrgID, map[string]any{"limits": map[string]any{"max_agents": 2}})
	if r := send(t, env, registerReq(s.Key, extra)); r.Status != http.StatusCreated {
		t.Errorf("registration after raising max_agents: %d %s", r.Status, r.Body)
	}

	// Concurrent registrations cannot exceed it together.
	orgID, owner := agentOwner(t, env)
	key := createIntakeKey(t, env, env, owner, "burst").Key
	setPolicy(t, env, policies, orgID, map[string]any{"limits": map[string]any{"max_agents": 2}})
	replies := make([]reply, 10)
	errs := make([]error, 10)
	parallelDo(10, func(i int) { replies[i], errs[i] = sendE(env, registerReq(key, newSpecAgent(env))) })
	created := 0
	for i, r := range replies {
		switch {
		case errs[i] != nil:
			t.Fatal(errs[i])
		case r.Status == http.StatusCreated:
			created++
		default:
			r.expectProblem(t, http.StatusForbidden, "limit_exceeded")
		}
	}
	if n := countRows(t, env, `SELECT count(*) FROM installations WHERE organization_id = $1`, orgID); created != 2 || n != 2 {
		t.Errorf("10 concurrent registrations against max_agents 2: %d created, %d stored", created, n)
	}
}

// TestIntakeBytesPerDay: a batch that would exceed intake_bytes_per_day is 429 limit_exceeded
// with Retry-After at the next UTC midnight and stores nothing; a retry of an accepted batch is
// still answered 202 duplicate.
func TestIntakeBytesPerDay(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, operator := scopedToken(t, env, "policies:write", "usage:read")
	s := newAgentSetup(t, env)
	b1, b2, b3 := batchBody("day-1", 1, 900), batchBody("day-2", 1, 900), batchBody("day-3", 1, 900)
	limit := len(b1) + len(b2) + len(b3)/2 // about 2500: two fit, the third does not
	setPolicy(t, env, operator, s.OrgID, map[string]any{"limits": map[string]any{"intake_bytes_per_day": limit}})

	s.Agent.submit(t, b1).accepted(t)
	s.Agent.submit(t, b2).accepted(t)
	for i := 0; i < 2; i++ {
		r := s.Agent.submit(t, b3)
		r.expectProblem(t, http.StatusTooManyRequests, "limit_exceeded")
		expectUntilMidnight(t, r)
	}
	if b, o := storedBatch(t, env, s.Agent.ID, "day-3"); b != 0 || o != 0 {
		t.Errorf("the refused batch was stored (%d batch rows, %d observations)", b, o)
	}
	// A retry of an accepted batch, though it would not fit either, is still a duplicate.
	for _, b := range [][]byte{b1, b2} {
		if r := s.Agent.submit(t, b).accepted(t); !r.Duplicate {
			t.Error("a retry of an accepted batch over the limit was not answered as a duplicate")
		}
	}
	u := usageToday(t, env, operator, s.OrgID)
	if u.IntakeRequests != 2 || u.IntakeBytes != int64(len(b1)+len(b2)) {
		t.Errorf("usage = %d requests, %d bytes; want 2, %d", u.IntakeRequests, u.IntakeBytes, len(b1)+len(b2))
	}
	// Nothing stored is lost.
	for _, id := range []string{"day-1", "day-2"} {
		if b, o := storedBatch(t, env, s.Agent.ID, id); b != 1 || o != 1 {
			t.Errorf("%s: %d batch rows, %d observations; want 1, 1", id, b, o)
		}
	}
	// A small batch that still fits is accepted.
	small := batchBody("day-4", 1, 0)
	if len(b1)+len(b2)+len(small) > limit {
		t.Fatalf("test arithmetic: small batch %d bytes does not fit", len(small))
	}
	s.Agent.submit(t, small).accepted(t)
	// The limit is the organization's: another organization's agents are not affected.
	newAgentSetup(t, env).Agent.submit(t, b3).accepted(t)
}

// TestJobsFlow: an owner queues a job, the agent lists it (signed) and reports its result, and
// the owner sees it succeeded; the job counts in usage once.
func TestJobsFlow(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, usage := scopedToken(t, env, "usage:read")
	s := newAgentSetup(t, env)
	idle := register(t, env, env, s.Key)

	job := createJob(t, env, s.Owner, s.Agent.ID, "uptime")
	if job.State != "queued" || job.InstallationID != s.Agent.ID || job.Result != nil {
		t.Errorf("created job = %+v", job)
	}
	if u := usageToday(t, env, usage, s.OrgID); u.JobsCreated != 1 {
		t.Errorf("usage jobs_created = %d, want 1", u.JobsCreated)
	}
	// Only its installation sees it.
	rep := idle.do(t, http.MethodGet, agentJobsURL, nil)
	if !emptyItems(t, rep) {
		t.Errorf("another installation's jobs: %d %s", rep.Status, rep.Body)
	}
	rep = s.Agent.do(t, http.MethodGet, agentJobsURL, nil)
	if rep.Status != http.StatusOK {
		t.Fatalf("agent jobs: %d %s", rep.Status, rep.Body)
	}
	var pending struct {
		Items []struct {
			ID      string `json:"id"`
			Command string `json:"command"`
		} `json:"items"`
	}
	rep.decode(t, &pending)
	if len(pending.Items) != 1 || pending.Items[0].ID != job.ID {
		t.Fatalf("agent jobs = %s", rep.Body)
	}
	if jobs := listOrgJobs(t, env, s.Owner); len(jobs) != 1 || jobs[0].State != "delivered" || jobs[0].DeliveredAt == nil {
		t.Errorf("after listing, owner sees %+v, want delivered", jobs)
	}
	// Another installation cannot report its result.
	idle.do(t, http.MethodPost, agentResultURL(job.ID), jsonBody(map[string]any{"status": "failed"})).
		expectProblem(t, http.StatusNotFound, "not_found")

	// An exit code is a 32-bit value: outside -2147483648..4294967295 it is refused naming the
	// field (beyond int64 it was once "The request could not be read", naming nothing).
	for _, code := range []string{"4294967296", "-2147483649", "12345678901234567890123", "1e30"} {
		p := s.Agent.do(t, http.MethodPost, agentResultURL(job.ID), []byte(`{"status":"failed","exit_code":`+code+`}`)).
			expectProblem(t, http.StatusBadRequest, "invalid_request")
		if len(p.Errors) == 0 || p.Errors[0].Field != "exit_code" {
			t.Errorf("exit_code %s: errors %+v, want one naming exit_code", code, p.Errors)
		}
	}
	result := jsonBody(map[string]any{"status": "succeeded", "exit_code": 0, "output": "up 1 day"})
	for i := 0; i < 2; i++ { // the same result again is success
		if r := s.Agent.do(t, http.MethodPost, agentResultURL(job.ID), result); r.Status != http.StatusOK {
			t.Errorf("result #%d: %d %s", i+1, r.Status, r.Body)
		}
	}
	s.Agent.do(t, http.MethodPost, agentResultURL(job.ID), jsonBody(map[string]any{"status": "failed", "exit_code": 1})).
		expectProblem(t, http.StatusConflict, "invalid_state")
	jobs := listOrgJobs(t, env, s.Owner)
	if len(jobs) != 1 || jobs[0].State != "succeeded" || jobs[0].CompletedAt == nil || jobs[0].Result == nil ||
		jobs[0].Result.Output != "up 1 day" || jobs[0].Result.ExitCode == nil || *jobs[0].Result.ExitCode != 0 {
		t.Errorf("owner sees %+v, want succeeded with the result", jobs)
	}
	// A completed job is no longer pending.
	rep = s.Agent.do(t, http.MethodGet, agentJobsURL, nil)
	if !emptyItems(t, rep) {
		t.Errorf("completed job still pending: %s", rep.Body)
	}
	if u := usageToday(t, env, usage, s.OrgID); u.JobsCreated != 1 {
		t.Errorf("usage jobs_created = %d, want 1", u.JobsCreated)
	}
	// Several pending jobs come oldest first. Fails when: PendingJobs' sort loop counts down
	// (job.go, i++ made i--: the poll never answers, the test times out).
	var queued []string
	for range 3 {
		queued = append(queued, createJob(t, env, s.Owner, s.Agent.ID, "uptime").ID)
	}
	rep = s.Agent.do(t, http.MethodGet, agentJobsURL, nil)
	pending.Items = nil
	rep.decode(t, &pending)
	var got []string
	for _, it := range pending.Items {
		got = append(got, it.ID)
	}
	if !slices.Equal(got, queued) {
		t.Errorf("pending jobs %v, want oldest first %v", got, queued)
	}
	// A job for another organization's installation is 404.
	other := newAgentSetup(t, env)
	send(t, env, createJobReq(s.Owner, other.Agent.ID, "uptime")).expectProblem(t, http.StatusNotFound, "not_found")
}

func emptyItems(t testing.TB, r reply) bool {
	t.Helper()
	var l struct {
		Items []any `json:"items"`
	}
	r.decode(t, &l)
	return r.Status == http.StatusOK && l.Items != nil && len(l.Items) == 0
}

// TestMaxJobsPerDay: past max_jobs_per_day, 429 limit_exceeded with Retry-After at the next UTC
// midnight; the job already queued stays.
func TestMaxJobsPerDay(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, operator := scopedToken(t, env, "policies:write", "usage:read")
	s := newAgentSetup(t, env)
	setPolicy(t, env, operator, s.OrgID, map[string]any{"limits": map[string]any{"max_jobs_per_day": 1}})
	first := createJob(t, env, s.Owner, s.Agent.ID, "uptime")
	for i := 0; i < 2; i++ {
		r := send(t, env, createJobReq(s.Owner, s.Agent.ID, "df -h"))
		r.expectProblem(t, http.StatusTooManyRequests, "limit_exceeded")
		expectUntilMidnight(t, r)
	}
	if jobs := listOrgJobs(t, env, s.Owner); len(jobs) != 1 || jobs[0].ID != first.ID {
		t.Errorf("jobs after the limit = %+v, want only the first", jobs)
	}
	if u := usageToday(t, env, operator, s.OrgID); u.JobsCreated != 1 {
		t.Errorf("usage jobs_created = %d, want 1", u.JobsCreated)
	}
}

// TestJobsNotEntitled: without the jobs entitlement, 403 not_entitled and nothing is queued.
func TestJobsNotEntitled(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, operator := scopedToken(t, env, "policies:write", "usage:read")
	s := newAgentSetup(t, env)
	setPolicy(t, env, operator, s.OrgID, map[string]any{"entitlements": map[string]any{"jobs": false}})
	send(t, env, createJobReq(s.Owner, s.Agent.ID, "uptime")).expectProblem(t, http.StatusForbidden, "not_entitled")
	if n := countRows(t, env, `SELECT count(*) FROM jobs WHERE organization_id = $1`, s.OrgID); n != 0 {
		t.Errorf("%d jobs stored without the entitlement", n)
	}
	if u := usageToday(t, env, operator, s.OrgID); u.JobsCreated != 0 {
		t.Errorf("usage jobs_created = %d, want 0", u.JobsCreated)
	}
}

// TestIntakeBytesPerDayUnderConcurrency: distinct batches sent at once cannot together exceed
// intake_bytes_per_day (as max_agents and max_jobs_per_day hold under concurrency). A correct
// server lets exactly two of them in (room for two and a half); the race is tried in three
// organizations.
// Fails when: the check refuses a batch that fits (total + 2 × size ≤ limit): "1 accepted".
func TestIntakeBytesPerDayUnderConcurrency(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, operator := scopedToken(t, env, "policies:write", "usage:read")
	const n = 20
	for round := 0; round < 3; round++ {
		s := newAgentSetup(t, env)
		bodies := make([][]byte, n)
		signed := make([]req, n)
		for i := range bodies {
			bodies[i] = batchBody("burst-"+strconv.Itoa(i), 1, 900)
		}
		limit := 2*len(bodies[0]) + len(bodies[0])/2 // room for two batches
		setPolicy(t, env, operator, s.OrgID, map[string]any{"limits": map[string]any{"intake_bytes_per_day": limit}})
		now := time.Now()
		for i, b := range bodies {
			signed[i] = req{Method: http.MethodPost, Path: observationsURL, Body: b, Header: s.Agent.sign(http.MethodPost, observationsURL, b, now)}
		}
		replies := make([]reply, n)
		errs := make([]error, n)
		parallelDo(n, func(i int) { replies[i], errs[i] = sendE(env, signed[i]) })
		accepted, acceptedBytes := 0, 0
		for i, r := range replies {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			switch r.Status {
			case http.StatusAccepted:
				accepted++
				acceptedBytes += len(bodies[i])
			case http.StatusTooManyRequests:
				r.expectProblem(t, http.StatusTooManyRequests, "limit_exceeded")
			default:
				t.Errorf("batch %d: %d %s", i, r.Status, r.Body)
			}
		}
		u := usageToday(t, env, operator, s.OrgID)
		// Exactly what the limit allows is accepted: a server that refused everything would
		// never pass it either.
		if accepted != 2 || u.IntakeBytes > int64(limit) || u.IntakeBytes != int64(acceptedBytes) {
			t.Errorf("round %d: %d concurrent batches against room for 2: %d accepted, intake_bytes %d (limit %d); want exactly 2 accepted",
				round, n, accepted, u.IntakeBytes, limit)
		}
		if stored := countRows(t, env, `SELECT count(*) FROM observation_batches WHERE installation_id = $1`, s.Agent.ID); stored != accepted {
			t.Errorf("round %d: %d batches stored, %d accepted", round, stored, accepted)
		}
	}
}

// TestIntakeCachedKeyIsCheckedAgain: intake takes an installation's key, organization and policy
// from a cache after the first batch, and its statement checks each again, so every change
// takes effect on the next batch: a lowered intake_bytes_per_day (the policy's version moved),
// a suspension, and a key no longer the installation's (401, nothing stored; the new key is
// looked up). Fails when the statement skips the policy version, the state or the key.
func TestIntakeCachedKeyIsCheckedAgain(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, operator := scopedToken(t, env, "policies:write", "organizations:write")
	s := newAgentSetup(t, env)
	b1 := batchBody("cached-1", 1, 100)
	s.Agent.submit(t, b1).accepted(t)
	s.Agent.submit(t, batchBody("cached-2", 1, 100)).accepted(t) // now from the cache

	setPolicy(t, env, operator, s.OrgID, map[string]any{"limits": map[string]any{"intake_bytes_per_day": 2 * len(b1)}})
	s.Agent.submit(t, batchBody("cached-3", 1, 100)).expectProblem(t, http.StatusTooManyRequests, "limit_exceeded")
	setPolicy(t, env, operator, s.OrgID, map[string]any{"limits": map[string]any{"intake_bytes_per_day": 1 << 30}})
	s.Agent.submit(t, batchBody("cached-3", 1, 100)).accepted(t)

	lifecycleOK(t, env, operator, s.OrgID, "suspend")
	s.Agent.submit(t, batchBody("cached-4", 1, 100)).expectProblem(t, http.StatusForbidden, "suspended")
	lifecycleOK(t, env, operator, s.OrgID, "resume")
	s.Agent.submit(t, batchBody("cached-4", 1, 100)).accepted(t)

	// The installation's key replaced behind the cache's back (no operation does this; the
	// statement must not trust the cache for it either).
	fresh := newSpecAgent(env)
	if _, err := env.Pool.Exec(t.Context(), `UPDATE installations SET public_key = $1 WHERE id = $2`, []byte(fresh.Pub), s.Agent.ID); err != nil {
		t.Fatal(err)
	}
	s.Agent.submit(t, batchBody("cached-5", 1, 100)).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	if b, o := storedBatch(t, env, s.Agent.ID, "cached-5"); b != 0 || o != 0 {
		t.Errorf("a batch signed with the replaced key was stored (%d batch rows, %d observations)", b, o)
	}
	fresh.ID = s.Agent.ID
	fresh.submit(t, batchBody("cached-5", 1, 100)).accepted(t)
}
