package apitest

import (
	"bytes"
	"context"
	"net/http"
	"testing"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/server/servertest"
)

func TestOrganizationLifecycle(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	c := newClient(t, env, env.Token(t, "organizations:write", "audit:read"))
	ctx := context.Background()

	created, err := c.CreateOrganizationWithResponse(ctx, &client.CreateOrganizationParams{IdempotencyKey: "k1"},
		client.CreateOrganizationJSONRequestBody{Slug: "acme", DisplayName: "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	if created.StatusCode() != http.StatusCreated {
		t.Fatalf("create: %d %s", created.StatusCode(), created.Body)
	}
	org := created.JSON201
	if got := created.HTTPResponse.Header.Get("Location"); got != "/api/v1/operator/organizations/"+org.Id {
		t.Errorf("Location = %q", got)
	}
	if got := created.HTTPResponse.Header.Get("ETag"); got != `"1"` {
		t.Errorf("ETag = %q", got)
	}
	if created.HTTPResponse.Header.Get("Idempotency-Expires") == "" {
		t.Error("no Idempotency-Expires")
	}

	got, err := c.GetOrganizationWithResponse(ctx, org.Id)
	if err != nil || got.JSON200 == nil || got.JSON200.Slug != "acme" {
		t.Fatalf("get: %v %s", err, got.Body)
	}

	upd, err := c.UpdateOrganizationWithResponse(ctx, org.Id, &client.UpdateOrganizationParams{IfMatch: `"1"`},
		client.UpdateOrganizationJSONRequestBody{DisplayName: "Acme Inc."})
	if err != nil || upd.JSON200 == nil || upd.JSON200.Version != 2 || upd.JSON200.DisplayName != "Acme Inc." {
		t.Fatalf("update: %v %d %s", err, upd.StatusCode(), upd.Body)
	}
	if upd.HTTPResponse.Header.Get("ETag") != `"2"` {
		t.Errorf("ETag after update = %q", upd.HTTPResponse.Header.Get("ETag"))
	}

	dup, _ := c.CreateOrganizationWithResponse(ctx, &client.CreateOrganizationParams{IdempotencyKey: "k2"},
		client.CreateOrganizationJSONRequestBody{Slug: "acme", DisplayName: "Other"})
	if dup.StatusCode() != http.StatusConflict || dup.ApplicationproblemJSON409 == nil || client.ErrorCode(dup.ApplicationproblemJSON409.Error) != client.ErrorCodeSlugTaken {
		t.Fatalf("duplicate slug: %d %s", dup.StatusCode(), dup.Body)
	}

	events, err := c.ListAuditEventsWithResponse(ctx, &client.ListAuditEventsParams{})
	if err != nil || events.JSON200 == nil {
		t.Fatalf("audit: %v %s", err, events.Body)
	}
	if n := len(events.JSON200.Items); n != 3 {
		t.Fatalf("audit events = %d, want 3: %s", n, events.Body)
	}
	t.Logf("%s", events.Body)
}

// TestCreateAnswersWhatItStored: a create sent in the write's last round trip answers the row
// it built before sending it; that answer (and its replay) is exactly what a read returns, its
// times the transaction's, and its policy and settings rows exist.
func TestCreateAnswersWhatItStored(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	token := env.Token(t, "organizations:write")
	key := newKey()
	created := send(t, env, createReq(token, key, jsonBody(map[string]string{"slug": "answered", "display_name": "Answered"})))
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	var o struct {
		ID string `json:"id"`
	}
	created.decode(t, &o)
	read := send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/organizations/" + o.ID, Token: token})
	if read.Status != http.StatusOK || !bytes.Equal(bytes.TrimSpace(read.Body), bytes.TrimSpace(created.Body)) {
		t.Errorf("create answered %s\nread returns %s", created.Body, read.Body)
	}
	if created.Header.Get("ETag") != read.Header.Get("ETag") || created.Header.Get("Location") != "/api/v1/operator/organizations/"+o.ID {
		t.Errorf("create's ETag %q and Location %q; read's ETag %q", created.Header.Get("ETag"), created.Header.Get("Location"), read.Header.Get("ETag"))
	}
	replay := send(t, env, createReq(token, key, jsonBody(map[string]string{"slug": "answered", "display_name": "Answered"})))
	if !bytes.Equal(replay.Body, created.Body) {
		t.Errorf("replay %s, want %s", replay.Body, created.Body)
	}
	if n := countRows(t, env, `SELECT count(*) FROM organizations o
		JOIN audit_events a ON a.organization_id = o.id AND a.time >= o.created_at
		WHERE o.id = $1 AND o.created_at = o.updated_at`, o.ID); n != 1 {
		t.Errorf("the organization with its audit: %d rows, want 1", n)
	}
	// Its policy and settings are the defaults, at version 1, with no rows until their first
	// write (TestDocumentsWithoutRows).
	if n := countRows(t, env, `SELECT (SELECT count(*) FROM organization_policies WHERE organization_id = $1)
		+ (SELECT count(*) FROM organization_settings WHERE organization_id = $1)`, o.ID); n != 0 {
		t.Errorf("a new organization has %d policy and settings rows, want none", n)
	}
}
