package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"renga.dev/renga/gen/client"
)

// TestGoClientDecodesNewValues: the Go client generated from openapi.yaml meets a server of a
// later release answering values of its enumerations it does not know (an organization state,
// a role, a job state and result status, a transfer kind and state, an audit outcome and actor
// type, an error code). Each answer is valid under openapi.yaml (open sets); the client decodes
// each without error and gives the value as it is.
func TestGoClientDecodesNewValues(t *testing.T) {
	spec, err := openapi3.NewLoader().LoadFromFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const orgID, xfrID = "org_01jc3x9m1h7r4v5n8q2w6e0t9y", "xfr_01jc3x9m1h7r4v5n8q2w6e0t9y"
	const at = "2026-12-01T12:00:00Z"
	org := map[string]any{"id": orgID, "slug": "acme", "display_name": "Acme", "state": "archived",
		"suspended_reason": nil, "purge_after": nil, "version": 3, "created_at": at, "updated_at": at}
	answers := map[string]struct {
		schema string
		status int
		body   map[string]any
	}{
		"GET /api/v1/operator/organizations/" + orgID: {"Organization", 200, org},
		"POST /api/v1/operator/organizations/" + orgID + "/suspend": {"Problem", 409, map[string]any{
			"type": "about:blank", "title": "Archived", "status": 409, "error": "a_code_from_a_later_release",
			"request_id": "req_01jc3x9m1h7r4v5n8q2w6e0t9y"}},
		"GET /api/v1/org/me": {"Me", 200, map[string]any{
			"user":         map[string]any{"id": "usr_01jc3x9m1h7r4v5n8q2w6e0t9y", "email": "ada@example.com", "display_name": "Ada"},
			"organization": map[string]any{"id": orgID, "slug": "acme", "display_name": "Acme", "state": "archived"},
			"role":         "auditor"}},
		"GET /api/v1/org/jobs": {"JobList", 200, map[string]any{"next_page_token": nil, "items": []any{map[string]any{
			"id": "job_01jc3x9m1h7r4v5n8q2w6e0t9y", "installation_id": "ins_01jc3x9m1h7r4v5n8q2w6e0t9y", "command": "facts",
			"state": "expired", "created_at": at, "delivered_at": at, "completed_at": at,
			"result": map[string]any{"status": "timed_out"}}}}},
		"GET /api/v1/operator/transfers/" + xfrID: {"Transfer", 200, map[string]any{
			"id": xfrID, "kind": "copy", "for_move": false, "state": "verifying", "organization_id": orgID,
			"progress": map[string]any{"rows": 10, "bytes": 100}, "counts": map[string]any{}, "sha256": nil,
			"size_bytes": nil, "failure": nil, "destination_url": nil, "completed_at": nil, "created_at": at, "updated_at": at}},
		"GET /api/v1/operator/audit-events": {"AuditEventList", 200, map[string]any{"next_page_token": nil, "items": []any{map[string]any{
			"id": "evt_01jc3x9m1h7r4v5n8q2w6e0t9y", "time": at, "request_id": "req_01jc3x9m1h7r4v5n8q2w6e0t9y",
			"actor":     map[string]any{"type": "service_account", "id": "sa_1", "name_snapshot": "ci"},
			"operation": "archiveOrganization", "targets": map[string]any{}, "outcome": "partial", "status": 200,
			"error": nil, "changed_fields": []any{}, "source_address": "10.0.0.1"}}}},
	}
	for route, a := range answers {
		// Through JSON, as a client sees it (numbers as float64).
		raw, err := json.Marshal(a.body)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		if err := spec.Components.Schemas[a.schema].Value.VisitJSON(v); err != nil {
			t.Fatalf("%s: the later release's answer is not valid under openapi.yaml: %v", route, err)
		}
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.Method+" "+r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		ct := "application/json"
		if a.status >= 400 {
			ct = "application/problem+json"
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(a.status)
		_ = json.NewEncoder(w).Encode(a.body)
	}))
	defer srv.Close()
	c, err := client.NewClientWithResponses(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	o, err := c.GetOrganizationWithResponse(ctx, orgID)
	if err != nil || o.JSON200 == nil || o.JSON200.State != "archived" {
		t.Errorf("organization: %v %+v", err, o)
	} else if client.OrganizationState(o.JSON200.State).Valid() {
		t.Error("archived is a known OrganizationState: this test shows nothing")
	}
	s, err := c.SuspendOrganizationWithResponse(ctx, orgID, nil, client.SuspendOrganizationJSONRequestBody{Reason: "x"})
	if err != nil || s.ApplicationproblemJSON409 == nil || s.ApplicationproblemJSON409.Error != "a_code_from_a_later_release" {
		t.Errorf("problem: %v %+v", err, s)
	}
	m, err := c.GetMeWithResponse(ctx)
	if err != nil || m.JSON200 == nil || m.JSON200.Role != "auditor" || m.JSON200.Organization.State != "archived" {
		t.Errorf("me: %v %+v", err, m)
	}
	j, err := c.ListJobsWithResponse(ctx, nil)
	if err != nil || j.JSON200 == nil || len(j.JSON200.Items) != 1 || j.JSON200.Items[0].State != "expired" ||
		j.JSON200.Items[0].Result == nil || j.JSON200.Items[0].Result.Status != "timed_out" {
		t.Errorf("jobs: %v %+v", err, j)
	}
	x, err := c.GetTransferWithResponse(ctx, xfrID)
	if err != nil || x.JSON200 == nil || x.JSON200.Kind != "copy" || x.JSON200.State != "verifying" {
		t.Errorf("transfer: %v %+v", err, x)
	}
	e, err := c.ListAuditEventsWithResponse(ctx, nil)
	if err != nil || e.JSON200 == nil || len(e.JSON200.Items) != 1 || e.JSON200.Items[0].Outcome != "partial" ||
		e.JSON200.Items[0].Actor.Type != "service_account" {
		t.Errorf("audit events: %v %+v", err, e)
	}
}
