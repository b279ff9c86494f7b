package apitest

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// noGrace makes a scheduled deletion due at once.
func noGrace(c *server.Config) { c.DeletionGracePeriod = 0 }

var discard = slog.New(slog.DiscardHandler)

// orgOwnedCounts counts the rows an organization owns, per table.
func orgOwnedCounts(t testing.TB, env *servertest.Env, orgID string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, table := range []string{"organizations", "memberships", "user_api_keys", "invitations", "organization_policies",
		"organization_settings", "organization_activity", "usage_counters", "usage_events", "outbound_mail"} {
		col := "organization_id"
		if table == "organizations" {
			col = "id"
		}
		out[table] = countRows(t, env, `SELECT count(*) FROM `+table+` WHERE `+col+` = $1`, orgID)
	}
	return out
}

// TestPurge: after the deadline the purge removes everything the organization owns but not the
// shared users; the audit log keeps the organization's ID and name snapshot and records the
// purge by the system actor; GET gives 404.
func TestPurge(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, noGrace)
	ctx := context.Background()
	_, op := scopedToken(t, env, "organizations:write", "policies:write", "audit:read")

	doomed := createOrg(t, env, op, "doomed", "Doomed Inc.")
	kept := createOrg(t, env, op, "kept", "Kept Ltd.")
	// One person owns both organizations (a shared user); the doomed one has a second owner, a
	// pending invitation, changed settings and policy, and usage.
	shared := addOwner(t, env, op, doomed.ID, "sam@shared.example", "Sam")
	sharedInKept := addOwner(t, env, op, kept.ID, "sam@shared.example", "Sam")
	if sharedInKept.User.ID != shared.User.ID {
		t.Fatalf("the same email made two users: %s and %s", shared.User.ID, sharedInKept.User.ID)
	}
	solo := addOwner(t, env, op, doomed.ID, "solo@doomed.example", "Solo")
	invite(t, env, op, doomed.ID, "pending@doomed.example")
	putPolicy(t, env, op, doomed.ID, `"1"`, map[string]any{"limits": map[string]any{"max_agents": 3}})
	if rep := send(t, env, settingsReq(shared.APIKey, `"1"`, map[string]any{"require_mfa": true})); rep.Status != http.StatusOK {
		t.Fatalf("settings: %d %s", rep.Status, rep.Body)
	}
	for _, id := range []string{doomed.ID, kept.ID} {
		if _, err := domain.CountUsage(ctx, env.Pool, id, "evt-"+id, time.Now(), domain.UsageDelta{IntakeRequests: 1}); err != nil {
			t.Fatal(err)
		}
	}
	before := orgOwnedCounts(t, env, doomed.ID)
	for table, n := range before {
		if n == 0 {
			t.Fatalf("setup left no %s rows for the doomed organization: %v", table, before)
		}
	}
	keptBefore := orgOwnedCounts(t, env, kept.ID)

	// Nothing is due before the deletion is scheduled.
	if n, err := server.PurgeDue(ctx, env.Pool, discard); err != nil || n != 0 {
		t.Fatalf("PurgeDue before scheduling: %d, %v", n, err)
	}
	o, _ := lifecycleOK(t, env, op, doomed.ID, "schedule")
	if o.State != "deletion_pending" {
		t.Fatalf("scheduled: %+v", o)
	}
	n, err := server.PurgeDue(ctx, env.Pool, discard)
	if err != nil || n != 1 {
		t.Fatalf("PurgeDue: %d, %v; want 1 purged", n, err)
	}

	_, gone := getOrgState(t, env, op, doomed.ID)
	gone.expectProblem(t, http.StatusNotFound, "not_found")
	for table, n := range orgOwnedCounts(t, env, doomed.ID) {
		if n != 0 {
			t.Errorf("%d %s rows of the purged organization remain", n, table)
		}
	}
	// The shared user stays, with their other organization; the purged organization's keys are dead.
	if n := countRows(t, env, `SELECT count(*) FROM users WHERE id = ANY($1)`, []string{shared.User.ID, solo.User.ID}); n != 2 {
		t.Errorf("%d of the 2 users remain, want both", n)
	}
	if after := orgOwnedCounts(t, env, kept.ID); fmt.Sprint(after) != fmt.Sprint(keptBefore) {
		t.Errorf("the other organization's rows changed: %v, before %v", after, keptBefore)
	}
	send(t, env, req{Method: http.MethodGet, Path: mePath, Token: shared.APIKey}).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	send(t, env, req{Method: http.MethodGet, Path: mePath, Token: solo.APIKey}).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	if rep := send(t, env, req{Method: http.MethodGet, Path: mePath, Token: sharedInKept.APIKey}); rep.Status != http.StatusOK {
		t.Errorf("the shared user's key of the other organization: %d %s", rep.Status, rep.Body)
	}

	// The audit log keeps the organization's ID and name, and records the purge by the system.
	rows, err := env.Pool.Query(ctx, `SELECT operation, actor_type, actor_id, organization_name_snapshot, outcome
		FROM audit_events WHERE organization_id = $1 ORDER BY id`, doomed.ID)
	if err != nil {
		t.Fatal(err)
	}
	ops := map[string]int{}
	for rows.Next() {
		var operation, actorType, actorID, outcome string
		var name *string
		if err := rows.Scan(&operation, &actorType, &actorID, &name, &outcome); err != nil {
			t.Fatal(err)
		}
		ops[operation]++
		if name == nil || *name != "Doomed Inc." {
			t.Errorf("audit event %s lost the organization's name snapshot: %v", operation, name)
		}
		if operation == "purgeOrganization" && (actorType != "system" || actorID != "system" || outcome != "succeeded") {
			t.Errorf("purge audit event by %s %s, outcome %s; want the system actor", actorType, actorID, outcome)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"createOrganization", "createInvitation", "putPolicy", "scheduleOrganizationDeletion", "purgeOrganization"} {
		if ops[want] == 0 {
			t.Errorf("the audit log of the purged organization lacks %s: %v", want, ops)
		}
	}
	if ops["purgeOrganization"] != 1 {
		t.Errorf("%d purgeOrganization events, want 1", ops["purgeOrganization"])
	}
	// And the API still serves them, filtered by the organization.
	rep := send(t, env, req{Method: http.MethodGet, Path: auditPath + "?organization_id=" + doomed.ID + "&operation=purgeOrganization", Token: op})
	var events struct {
		Items []struct {
			Actor   struct{ Type, ID string }
			Targets struct {
				OrganizationID           string `json:"organization_id"`
				OrganizationNameSnapshot string `json:"organization_name_snapshot"`
			}
		}
	}
	rep.decode(t, &events)
	if rep.Status != http.StatusOK || len(events.Items) != 1 || events.Items[0].Actor.Type != "system" ||
		events.Items[0].Targets.OrganizationID != doomed.ID || events.Items[0].Targets.OrganizationNameSnapshot != "Doomed Inc." {
		t.Errorf("audit events of the purge: %d %s", rep.Status, rep.Body)
	}
	// Operations on the purged organization are 404; the purge does not run again.
	lifecycle(t, env, op, doomed.ID, "cancel").expectProblem(t, http.StatusNotFound, "not_found")
	if n, err := server.PurgeDue(ctx, env.Pool, discard); err != nil || n != 0 {
		t.Errorf("second PurgeDue: %d, %v; want nothing to do", n, err)
	}
}

// TestPurgeStartedCannotBeCancelled: once purging, cancel (and resume, and rescheduling) is
// 409 purge_started, and the purge finishes an interrupted purge.
func TestPurgeStartedCannotBeCancelled(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := context.Background()
	opID, op := scopedToken(t, env, "organizations:write")
	org := createOrg(t, env, op, "acme", "Acme")
	owner := addOwner(t, env, op, org.ID, "olivia@acme.example", "Olivia")
	lifecycleOK(t, env, op, org.ID, "schedule")
	// A purge that took the row and then crashed.
	if _, err := env.Pool.Exec(ctx, `UPDATE organizations SET state = 'purging', purge_after = NULL WHERE id = $1`, org.ID); err != nil {
		t.Fatal(err)
	}
	for _, action := range []string{"cancel", "resume", "schedule", "suspend"} {
		rep := lifecycle(t, env, op, org.ID, action)
		rep.expectProblem(t, http.StatusConflict, "purge_started")
		expectOneAudit(t, env, rep, map[string]string{"cancel": "cancelOrganizationDeletion", "resume": "resumeOrganization",
			"schedule": "scheduleOrganizationDeletion", "suspend": "suspendOrganization"}[action], "failed", opID, org.ID, "purge_started")
	}
	if st := storedLifecycle(t, env, org.ID); st.State != "purging" {
		t.Fatalf("after refused cancels: %+v", st)
	}
	// A purging organization's owners are locked out.
	send(t, env, req{Method: http.MethodGet, Path: mePath, Token: owner.APIKey}).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	if n, err := server.PurgeDue(ctx, env.Pool, discard); err != nil || n != 1 {
		t.Fatalf("PurgeDue of an interrupted purge: %d, %v", n, err)
	}
	_, gone := getOrgState(t, env, op, org.ID)
	gone.expectProblem(t, http.StatusNotFound, "not_found")
}

// TestPurgeCancelRace: at the deadline, a cancellation over HTTP races two purgers. Every trial
// has exactly one winner: cancel 200 leaves the organization active and unpurged; otherwise the
// cancellation fails (409 purge_started, or 404 once the purge finished) and the organization is
// gone, purged exactly once. Never a 500.
// Fails when: the purge takes its organization without the row lock (no FOR UPDATE SKIP
// LOCKED): "trial 0: cancel 409 purge_started but organization rows 0, 2 purge starts"; and
// when a cancellation refuses a deletion that is due but not started ("cancel 409 purge_started
// but organization rows 1, 0 purge starts").
func TestPurgeCancelRace(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, noGrace)
	ctx := context.Background()
	_, op := scopedToken(t, env, "organizations:write")
	const trials = 500
	outcomes := map[string]int{}
	failures := 0
	fail := func(format string, args ...any) {
		t.Helper()
		failures++
		t.Errorf(format, args...)
		if failures >= 10 {
			t.Fatalf("stopping after %d failed trials; outcomes so far %v", failures, outcomes)
		}
	}
	start := time.Now()
	for i := 0; i < trials; i++ {
		o, err := domain.CreateOrganization(ctx, env.Pool, fmt.Sprintf("race-%d", i), fmt.Sprintf("Race %d", i))
		if err != nil {
			t.Fatal(err)
		}
		// Documents with rows (a new organization's have none until their first write).
		if _, _, _, err := domain.PutPolicy(ctx, env.Pool, o.ID, 1, domain.PolicyDocument{}, nil); err != nil {
			t.Fatal(err)
		}
		if _, _, err := domain.PutSettings(ctx, env.Pool, o.ID, 1, domain.SettingsWrite{}, nil); err != nil {
			t.Fatal(err)
		}
		if _, _, err := domain.ScheduleDeletion(ctx, env.Pool, o.ID, 0); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		gate := make(chan struct{})
		var cancel reply
		var cancelErr error
		var purged [2]int
		var purgeErr [2]error
		wg.Add(3)
		go func() {
			defer wg.Done()
			<-gate
			cancel, cancelErr = sendE(env, req{Method: http.MethodDelete, Path: orgPath(o.ID) + "/deletion", Token: op})
		}()
		for j := range 2 {
			go func() {
				defer wg.Done()
				<-gate
				purged[j], purgeErr[j] = server.PurgeDue(ctx, env.Pool, discard)
			}()
		}
		close(gate)
		wg.Wait()
		if cancelErr != nil || purgeErr[0] != nil || purgeErr[1] != nil {
			fail("trial %d: cancel %v, purgers %v %v", i, cancelErr, purgeErr[0], purgeErr[1])
			continue
		}
		exists := countRows(t, env, `SELECT count(*) FROM organizations WHERE id = $1`, o.ID)
		purges := countRows(t, env, `SELECT count(*) FROM audit_events WHERE organization_id = $1 AND operation = 'purgeOrganization'`, o.ID)
		starts := countRows(t, env, `SELECT count(*) FROM audit_events WHERE organization_id = $1 AND operation = 'startOrganizationPurge'`, o.ID)
		var p problemBody
		if cancel.Status != http.StatusOK {
			p = cancel.problem(t)
		}
		switch {
		case cancel.Status == http.StatusOK:
			outcomes["cancel won"]++
			var got orgState
			cancel.decode(t, &got)
			st := storedLifecycle(t, env, o.ID)
			if got.State != "active" || st.State != "active" || st.PurgeAfter != nil || purges != 0 || starts != 0 {
				fail("trial %d: cancel 200 (%s) but stored %+v, %d purge starts, %d purges", i, got.State, st, starts, purges)
			}
			if owned := orgOwnedCounts(t, env, o.ID); owned["organization_policies"] != 1 || owned["organization_settings"] != 1 {
				fail("trial %d: cancel won but the organization's documents are gone: %v", i, owned)
			}
		case cancel.Status == http.StatusConflict && p.Error == "purge_started", cancel.Status == http.StatusNotFound && p.Error == "not_found":
			outcomes["purge won, cancel "+p.Error]++
			if exists != 0 || purges != 1 || starts != 1 {
				fail("trial %d: cancel %d %s but organization rows %d, %d purge starts, %d purges (want 0, 1, 1)",
					i, cancel.Status, p.Error, exists, starts, purges)
			}
		default:
			fail("trial %d: cancel answered %d %s", i, cancel.Status, cancel.Body)
		}
		if purged[0]+purged[1] > 0 && cancel.Status == http.StatusOK {
			fail("trial %d: cancel won but the purgers report %v purged", i, purged)
		}
		if purged[0]+purged[1] > 1 {
			fail("trial %d: the two purgers report %v: one organization purged twice", i, purged)
		}
	}
	// Both races happen: a run where one side always wins tested only half of it.
	if outcomes["cancel won"] == 0 || outcomes["purge won, cancel purge_started"]+outcomes["purge won, cancel not_found"] == 0 {
		t.Errorf("over %d trials one outcome never occurred: %v", trials, outcomes)
	}
	// Nothing is left half-done.
	if n := countRows(t, env, `SELECT count(*) FROM organizations WHERE state NOT IN ('active')`); n != 0 {
		t.Errorf("%d organizations left in another state than active", n)
	}
	t.Logf("%d trials in %s: %v", trials, time.Since(start).Round(time.Millisecond), outcomes)
}

// TestPurgeRacingIntakeLeavesNothing: agents keep sending batches while their organization is
// scheduled for deletion and purged. Nothing of it remains afterwards, and no observation or
// batch anywhere names an installation that is gone (observations and batches hold no foreign
// key to installations: migration 00016).
func TestPurgeRacingIntakeLeavesNothing(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, noGrace)
	ctx := context.Background()
	_, op := scopedToken(t, env, "organizations:write")
	a := newAgentSetup(t, env)
	other := newAgentSetup(t, env) // another organization's intake goes on throughout
	a.Agent.submit(t, batchBody("before", 2, 10)).accepted(t)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	statuses := map[int]int{}
	for w := range 4 {
		agent := a.Agent
		if w == 3 {
			agent = other.Agent
		}
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				rep, err := agent.doE(http.MethodPost, observationsURL, batchBody(fmt.Sprintf("w%d-%d", w, i), 3, 50))
				mu.Lock()
				if err != nil {
					statuses[-1]++
				} else {
					statuses[rep.Status]++
				}
				mu.Unlock()
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	lifecycleOK(t, env, op, a.OrgID, "schedule")
	// Intake holding the organization row makes a purge pass it over: the next run takes it.
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := server.PurgeDue(ctx, env.Pool, discard)
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the organization was not purged within 30 s")
		}
	}
	time.Sleep(200 * time.Millisecond) // intake of the purged organization's agent goes on a while
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for status, n := range statuses {
		// 403 while deletion is pending (the organization is not active), 401 once it is gone.
		if status != http.StatusAccepted && status != http.StatusForbidden && status != http.StatusUnauthorized {
			t.Errorf("%d answers %d (-1: no answer), want 202, 403 or 401: %v", n, status, statuses)
		}
	}
	if statuses[http.StatusAccepted] < 8 || statuses[http.StatusUnauthorized] == 0 {
		t.Errorf("answers %v: want batches accepted before the purge and refused after it", statuses)
	}
	for _, table := range []string{"observations", "observation_batches", "installations"} {
		if n := countRows(t, env, `SELECT count(*) FROM `+table+` WHERE organization_id = $1`, a.OrgID); n != 0 {
			t.Errorf("%d %s rows of the purged organization remain", n, table)
		}
		if n := countRows(t, env, `SELECT count(*) FROM `+table+` WHERE organization_id = $1`, other.OrgID); n == 0 {
			t.Errorf("the other organization has no %s rows", table)
		}
	}
	for _, table := range []string{"observations", "observation_batches"} {
		if n := countRows(t, env, `SELECT count(*) FROM `+table+` x
			WHERE NOT EXISTS (SELECT 1 FROM installations i WHERE i.id = x.installation_id AND i.organization_id = x.organization_id)`); n != 0 {
			t.Errorf("%d %s rows name no installation of their organization", n, table)
		}
	}
}

// TestPurgeRemovesObservationsBeyondOneBatch: the purge deletes an organization's observations
// and batches in batches of 5000 until none is left: no cascade from installations removes what
// a stopped loop would leave (migration 00016).
func TestPurgeRemovesObservationsBeyondOneBatch(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, noGrace)
	ctx := context.Background()
	_, op := scopedToken(t, env, "organizations:write")
	a := newAgentSetup(t, env)
	a.Agent.submit(t, batchBody("first", 1, 10)).accepted(t)
	for _, sql := range []string{
		`INSERT INTO observation_batches (installation_id, batch_id, organization_id)
			SELECT installation_id, 'bulk-' || g, organization_id FROM observations, generate_series(1, 10000) g`,
		`INSERT INTO observations (organization_id, installation_id, batch_id, observed_at, kind, data)
			SELECT organization_id, installation_id, 'bulk-' || g, now(), 'host.facts', '{}' FROM observations, generate_series(1, 10000) g`,
	} {
		if _, err := env.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	lifecycleOK(t, env, op, a.OrgID, "schedule")
	if n, err := server.PurgeDue(ctx, env.Pool, discard); err != nil || n != 1 {
		t.Fatalf("PurgeDue: %d, %v; want 1 purged", n, err)
	}
	for _, table := range []string{"observations", "observation_batches"} {
		if n := countRows(t, env, `SELECT count(*) FROM `+table); n != 0 {
			t.Errorf("%d %s rows remain after the purge of the only organization that had any", n, table)
		}
	}
}
