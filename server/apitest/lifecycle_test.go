package apitest

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"renga.dev/renga/server/servertest"
)

// orgState is the JSON of an organization with its lifecycle fields.
type orgState struct {
	ID              string     `json:"id"`
	DisplayName     string     `json:"display_name"`
	State           string     `json:"state"`
	SuspendedReason *string    `json:"suspended_reason"`
	PurgeAfter      *time.Time `json:"purge_after"`
	Version         int64      `json:"version"`
}

// lifecycle sends a lifecycle request to an organization: suspend (with a reason), resume,
// schedule (POST deletion) or cancel (DELETE deletion).
func lifecycle(t testing.TB, env *servertest.Env, token, orgID, action string) reply {
	t.Helper()
	r := req{Token: token}
	switch action {
	case "suspend":
		r.Method, r.Path, r.Body = http.MethodPost, orgPath(orgID)+"/suspend", jsonBody(map[string]string{"reason": "unpaid invoice"})
	case "resume":
		r.Method, r.Path = http.MethodPost, orgPath(orgID)+"/resume"
	case "schedule":
		r.Method, r.Path = http.MethodPost, orgPath(orgID)+"/deletion"
	case "cancel":
		r.Method, r.Path = http.MethodDelete, orgPath(orgID)+"/deletion"
	default:
		t.Fatalf("unknown action %s", action)
	}
	return send(t, env, r)
}

// lifecycleOK sends a lifecycle request that must succeed and returns the organization.
func lifecycleOK(t testing.TB, env *servertest.Env, token, orgID, action string) (orgState, reply) {
	t.Helper()
	rep := lifecycle(t, env, token, orgID, action)
	if rep.Status != http.StatusOK {
		t.Fatalf("%s: %d %s", action, rep.Status, rep.Body)
	}
	var o orgState
	rep.decode(t, &o)
	if etag := rep.Header.Get("ETag"); etag != `"`+strconv.FormatInt(o.Version, 10)+`"` {
		t.Errorf("%s: ETag %q for version %d", action, etag, o.Version)
	}
	return o, rep
}

// activityChanges counts the organization's Activity rows of operation: all, and those that
// changed something.
func activityChanges(t testing.TB, env *servertest.Env, orgID, operation string) (all, changed int) {
	t.Helper()
	all = countRows(t, env, `SELECT count(*) FROM organization_activity WHERE organization_id = $1 AND operation = $2`, orgID, operation)
	changed = countRows(t, env, `SELECT count(*) FROM organization_activity WHERE organization_id = $1 AND operation = $2
		AND cardinality(changed_fields) > 0`, orgID, operation)
	return all, changed
}

// TestSuspendResumeTwice: suspending (and resuming) twice is success both times with the same
// state; the state changes once, so one audit event and one Activity entry carry the change and
// the second attempt's audit event has no changed fields and no Activity entry.
func TestSuspendResumeTwice(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	opID, op := scopedToken(t, env, "organizations:write")
	org := createOrg(t, env, op, "acme", "Acme")

	for _, step := range []struct {
		action, operation, state string
		reason                   bool
	}{
		{"suspend", "suspendOrganization", "suspended", true},
		{"resume", "resumeOrganization", "active", false},
	} {
		first, rep1 := lifecycleOK(t, env, op, org.ID, step.action)
		second, rep2 := lifecycleOK(t, env, op, org.ID, step.action)
		if first.State != step.state || second.State != step.state || first.Version != second.Version {
			t.Errorf("%s twice: %+v then %+v, want %s both times at one version", step.action, first, second, step.state)
		}
		if st := storedLifecycle(t, env, org.ID); (st.SuspendedReason != nil) != step.reason {
			t.Errorf("%s: stored suspended_reason %v", step.action, st.SuspendedReason)
		}
		if (first.SuspendedReason != nil) != step.reason || (second.SuspendedReason != nil) != step.reason {
			t.Errorf("%s: response suspended_reason %v then %v, want set: %v", step.action, first.SuspendedReason, second.SuspendedReason, step.reason)
		}
		e1 := expectOneAudit(t, env, rep1, step.operation, "succeeded", opID, org.ID, "")
		e2 := expectOneAudit(t, env, rep2, step.operation, "succeeded", opID, org.ID, "")
		if !slices.Contains(e1.ChangedFields, "state") {
			t.Errorf("first %s audit changed_fields = %v, want state", step.action, e1.ChangedFields)
		}
		if len(e2.ChangedFields) != 0 {
			t.Errorf("second %s audit changed_fields = %v, want none", step.action, e2.ChangedFields)
		}
		// The second attempt changed nothing: it is in the audit log only, not in the Activity.
		// Fails when: an empty change set counts as a change (audit.go, len(ChangedFields) >= 0).
		if all, changed := activityChanges(t, env, org.ID, step.operation); all != 1 || changed != 1 {
			t.Errorf("%d %s Activity entries, %d with changes, want 1 (the first attempt's)", all, step.operation, changed)
		}
		var version int64
		if err := env.Pool.QueryRow(context.Background(), `SELECT version FROM organizations WHERE id = $1`, org.ID).Scan(&version); err != nil {
			t.Fatal(err)
		}
		if version != second.Version {
			t.Errorf("stored version %d, response %d", version, second.Version)
		}
	}
	// Suspend keeps the first reason.
	lifecycleOK(t, env, op, org.ID, "suspend")
	rep := send(t, env, req{Method: http.MethodPost, Path: orgPath(org.ID) + "/suspend", Token: op,
		Body: jsonBody(map[string]string{"reason": "another reason"})})
	var o orgState
	rep.decode(t, &o)
	if st := storedLifecycle(t, env, org.ID); rep.Status != http.StatusOK || st.SuspendedReason == nil || *st.SuspendedReason != "unpaid invoice" {
		t.Errorf("second suspend with another reason: %d %s (stored reason %v)", rep.Status, rep.Body, st.SuspendedReason)
	}
	if o.SuspendedReason == nil || *o.SuspendedReason != "unpaid invoice" {
		t.Errorf("second suspend response suspended_reason = %v, want the first reason", o.SuspendedReason)
	}
	// A suspension needs a reason.
	send(t, env, req{Method: http.MethodPost, Path: orgPath(org.ID) + "/suspend", Token: op, Body: jsonBody(map[string]string{})}).
		expectProblem(t, http.StatusBadRequest, "invalid_request")
}

// TestSuspendedOwnersReadOnly: a suspended organization's owners get 403 suspended on writes,
// and keep reading.
func TestSuspendedOwnersReadOnly(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, op := scopedToken(t, env, "organizations:write")
	org := createOrg(t, env, op, "acme", "Acme")
	owner := addOwner(t, env, op, org.ID, "olivia@acme.example", "Olivia")

	lifecycleOK(t, env, op, org.ID, "suspend")
	send(t, env, settingsReq(owner.APIKey, `"1"`, map[string]any{"require_mfa": true})).
		expectProblem(t, http.StatusForbidden, "suspended")
	for _, path := range []string{mePath, activityPath, settingsPath} {
		if rep := send(t, env, req{Method: http.MethodGet, Path: path, Token: owner.APIKey}); rep.Status != http.StatusOK {
			t.Errorf("GET %s while suspended: %d %s", path, rep.Status, rep.Body)
		}
	}
	if s, _ := getSettings(t, env, owner.APIKey); s.RequireMFA || s.Version != 1 {
		t.Errorf("a refused write changed the settings: %+v", s)
	}
	// A deletion_pending organization is read-only too.
	lifecycleOK(t, env, op, org.ID, "resume")
	lifecycleOK(t, env, op, org.ID, "schedule")
	send(t, env, settingsReq(owner.APIKey, `"1"`, map[string]any{"require_mfa": true})).
		expectProblem(t, http.StatusForbidden, "suspended")
	lifecycleOK(t, env, op, org.ID, "cancel")
	if rep := send(t, env, settingsReq(owner.APIKey, `"1"`, map[string]any{"require_mfa": true})); rep.Status != http.StatusOK {
		t.Errorf("PUT settings once active again: %d %s", rep.Status, rep.Body)
	}
}

// TestDeletionScheduling: scheduling makes the organization deletion_pending with purge_after =
// now + grace, twice keeps the first deadline; cancelling returns it to active, or to suspended
// if it was; suspending during deletion_pending is 409 invalid_state.
func TestDeletionScheduling(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	opID, op := scopedToken(t, env, "organizations:write")
	org := createOrg(t, env, op, "acme", "Acme")
	grace := env.Config.DeletionGracePeriod
	if grace != 720*time.Hour {
		t.Fatalf("test grace period = %s", grace)
	}

	before := time.Now()
	o1, rep := lifecycleOK(t, env, op, org.ID, "schedule")
	after := time.Now()
	stored := storedLifecycle(t, env, org.ID)
	if o1.State != "deletion_pending" || stored.PurgeAfter == nil ||
		stored.PurgeAfter.Before(before.Add(grace).Add(-2*time.Second)) || stored.PurgeAfter.After(after.Add(grace).Add(2*time.Second)) {
		t.Fatalf("scheduled: %+v (stored purge_after %v), want deletion_pending with purge_after about now + %s", o1, stored.PurgeAfter, grace)
	}
	if o1.PurgeAfter == nil || !o1.PurgeAfter.Equal(*stored.PurgeAfter) {
		t.Errorf("schedule response purge_after = %v, want the stored %s: %s", o1.PurgeAfter, stored.PurgeAfter, rep.Body)
	}
	if e := expectOneAudit(t, env, rep, "scheduleOrganizationDeletion", "succeeded", opID, org.ID, ""); !slices.Contains(e.ChangedFields, "purge_after") {
		t.Errorf("schedule audit changed_fields = %v", e.ChangedFields)
	}
	time.Sleep(10 * time.Millisecond)
	o2, rep := lifecycleOK(t, env, op, org.ID, "schedule")
	if again := storedLifecycle(t, env, org.ID); o2.State != "deletion_pending" || again.PurgeAfter == nil ||
		!again.PurgeAfter.Equal(*stored.PurgeAfter) || o2.Version != o1.Version {
		t.Errorf("scheduled twice: %+v (stored purge_after %v), want the first deadline %s kept", o2, again.PurgeAfter, stored.PurgeAfter)
	}
	if o2.PurgeAfter == nil || !o2.PurgeAfter.Equal(*stored.PurgeAfter) {
		t.Errorf("second schedule response purge_after = %v, want the first deadline %s", o2.PurgeAfter, stored.PurgeAfter)
	}
	if e := expectOneAudit(t, env, rep, "scheduleOrganizationDeletion", "succeeded", opID, org.ID, ""); len(e.ChangedFields) != 0 {
		t.Errorf("second schedule audit changed_fields = %v", e.ChangedFields)
	}
	// GET shows the deadline too.
	if o, rep := getOrgState(t, env, op, org.ID); o.PurgeAfter == nil || !o.PurgeAfter.Equal(*stored.PurgeAfter) {
		t.Errorf("GET of a deletion_pending organization: purge_after %v, want %s: %s", o.PurgeAfter, stored.PurgeAfter, rep.Body)
	}

	rep = lifecycle(t, env, op, org.ID, "suspend")
	rep.expectProblem(t, http.StatusConflict, "invalid_state")
	expectOneAudit(t, env, rep, "suspendOrganization", "failed", opID, org.ID, "invalid_state")
	if o, _ := getOrgState(t, env, op, org.ID); o.State != "deletion_pending" {
		t.Errorf("after a refused suspend: %+v", o)
	}

	o3, _ := lifecycleOK(t, env, op, org.ID, "cancel")
	if o3.State != "active" || o3.PurgeAfter != nil || o3.SuspendedReason != nil {
		t.Errorf("cancelled: %+v, want active without purge_after", o3)
	}
	o4, rep := lifecycleOK(t, env, op, org.ID, "cancel")
	if o4.State != "active" || o4.Version != o3.Version {
		t.Errorf("cancelled twice: %+v", o4)
	}
	if e := expectOneAudit(t, env, rep, "cancelOrganizationDeletion", "succeeded", opID, org.ID, ""); len(e.ChangedFields) != 0 {
		t.Errorf("second cancel audit changed_fields = %v", e.ChangedFields)
	}

	// Suspended, scheduled, cancelled: back to suspended with its reason.
	lifecycleOK(t, env, op, org.ID, "suspend")
	if o, _ := lifecycleOK(t, env, op, org.ID, "schedule"); o.State != "deletion_pending" {
		t.Errorf("schedule of a suspended organization: %+v", o)
	}
	o5, _ := lifecycleOK(t, env, op, org.ID, "cancel")
	if st := storedLifecycle(t, env, org.ID); o5.State != "suspended" || st.State != "suspended" || st.SuspendedReason == nil ||
		*st.SuspendedReason != "unpaid invoice" || st.PurgeAfter != nil || o5.PurgeAfter != nil {
		t.Errorf("cancel of a suspended organization's deletion: %+v (stored %+v), want suspended with its reason", o5, st)
	}
	if o5.SuspendedReason == nil || *o5.SuspendedReason != "unpaid invoice" {
		t.Errorf("cancel response suspended_reason = %v, want the reason kept", o5.SuspendedReason)
	}
	// The lifecycle of the organization is in its Activity: two schedules and two cancels changed it.
	if _, changed := activityChanges(t, env, org.ID, "scheduleOrganizationDeletion"); changed != 2 {
		t.Errorf("%d scheduleOrganizationDeletion Activity entries with changes, want 2", changed)
	}
	if _, changed := activityChanges(t, env, org.ID, "cancelOrganizationDeletion"); changed != 2 {
		t.Errorf("%d cancelOrganizationDeletion Activity entries with changes, want 2", changed)
	}
	// Unknown organizations are 404.
	lifecycle(t, env, op, "org_00000000000000000000000000", "schedule").expectProblem(t, http.StatusNotFound, "not_found")
}

func getOrgState(t testing.TB, env *servertest.Env, token, id string) (orgState, reply) {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodGet, Path: orgPath(id), Token: token})
	var o orgState
	if rep.Status == http.StatusOK {
		rep.decode(t, &o)
	}
	return o, rep
}

// storedLifecycle reads an organization's lifecycle columns from the database.
func storedLifecycle(t testing.TB, env *servertest.Env, id string) orgState {
	t.Helper()
	o := orgState{ID: id}
	if err := env.Pool.QueryRow(context.Background(), `SELECT display_name, state, suspended_reason, purge_after, version
		FROM organizations WHERE id = $1`, id).Scan(&o.DisplayName, &o.State, &o.SuspendedReason, &o.PurgeAfter, &o.Version); err != nil {
		t.Fatal(err)
	}
	return o
}
