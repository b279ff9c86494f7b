package apitest

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/server/servertest"
)

// auditRow is an audit event as stored.
type auditRow struct {
	ID, Operation, Outcome, ActorID string
	OrganizationID                  *string
	Status                          int
	Error                           *string
	ChangedFields                   []string
	SourceAddress                   string
}

// auditByRequest returns the audit events of one request.
func auditByRequest(t testing.TB, env *servertest.Env, requestID string) []auditRow {
	t.Helper()
	rows, err := env.Pool.Query(context.Background(), `SELECT id, operation, outcome, actor_id, organization_id, status, error,
		changed_fields, source_address FROM audit_events WHERE request_id = $1`, requestID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []auditRow
	for rows.Next() {
		var a auditRow
		if err := rows.Scan(&a.ID, &a.Operation, &a.Outcome, &a.ActorID, &a.OrganizationID, &a.Status, &a.Error,
			&a.ChangedFields, &a.SourceAddress); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// expectOneAudit asserts that the reply's request left exactly one audit event, as described.
func expectOneAudit(t testing.TB, env *servertest.Env, r reply, operation, outcome, actorID, orgID, code string) auditRow {
	t.Helper()
	rid := r.Header.Get("X-Request-Id")
	if rid == "" {
		t.Fatalf("reply %d has no X-Request-Id", r.Status)
	}
	events := auditByRequest(t, env, rid)
	if len(events) != 1 {
		t.Fatalf("request %s (%d) left %d audit events, want 1: %+v", rid, r.Status, len(events), events)
	}
	e := events[0]
	if e.Operation != operation || e.Outcome != outcome || e.Status != r.Status || e.ActorID != actorID {
		t.Errorf("audit event = %+v; want operation %s, outcome %s, status %d, actor %s", e, operation, outcome, r.Status, actorID)
	}
	switch {
	case code == "" && e.Error != nil:
		t.Errorf("audit event of a success has error %q", *e.Error)
	case code != "" && (e.Error == nil || *e.Error != code):
		t.Errorf("audit event error = %v, want %q", e.Error, code)
	}
	if orgID != "" && (e.OrganizationID == nil || *e.OrganizationID != orgID) {
		t.Errorf("audit event organization_id = %v, want %s", e.OrganizationID, orgID)
	}
	if e.SourceAddress != "127.0.0.1" {
		t.Errorf("audit event source_address = %q, want 127.0.0.1", e.SourceAddress)
	}
	return e
}

func TestAuditFailedAttempts(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	writerID, writer := scopedToken(t, env, "organizations:write")
	readerID, reader := scopedToken(t, env, "organizations:read")

	created := send(t, env, createReq(writer, newKey(), jsonBody(map[string]string{"slug": "acme", "display_name": "Acme"})))
	if created.Status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.Status, created.Body)
	}
	var org organization
	created.decode(t, &org)
	e := expectOneAudit(t, env, created, "createOrganization", "succeeded", writerID, org.ID, "")
	if !slices.Equal(e.ChangedFields, []string{"slug", "display_name"}) {
		t.Errorf("create changed_fields = %v", e.ChangedFields)
	}
	updated := send(t, env, patchReq(writer, org.ID, `"1"`, "Acme Inc."))
	if updated.Status != http.StatusOK {
		t.Fatalf("update: %d %s", updated.Status, updated.Body)
	}
	e = expectOneAudit(t, env, updated, "updateOrganization", "succeeded", writerID, org.ID, "")
	if !slices.Equal(e.ChangedFields, []string{"display_name"}) {
		t.Errorf("update changed_fields = %v", e.ChangedFields)
	}

	unchanged := func(t *testing.T) {
		t.Helper()
		o, _ := getOrg(t, env, reader, org.ID)
		if o.Version != 2 || o.DisplayName != "Acme Inc." || o.Slug != "acme" {
			t.Errorf("organization changed: %+v", o)
		}
		if n := countRows(t, env, `SELECT count(*) FROM organizations`); n != 1 {
			t.Errorf("%d organizations, want 1", n)
		}
		if n := countRows(t, env, `SELECT count(*) FROM organization_activity`); n != 2 {
			t.Errorf("%d Activity rows, want 2 (the two successes)", n)
		}
	}

	t.Run("412", func(t *testing.T) {
		r := send(t, env, patchReq(writer, org.ID, `"1"`, "Stale"))
		r.expectProblem(t, http.StatusPreconditionFailed, "version_mismatch")
		expectOneAudit(t, env, r, "updateOrganization", "failed", writerID, org.ID, "version_mismatch")
		unchanged(t)
	})
	t.Run("409 slug_taken", func(t *testing.T) {
		r := send(t, env, createReq(writer, newKey(), jsonBody(map[string]string{"slug": "acme", "display_name": "Other"})))
		r.expectProblem(t, http.StatusConflict, "slug_taken")
		e := expectOneAudit(t, env, r, "createOrganization", "failed", writerID, "", "slug_taken")
		if e.OrganizationID != nil {
			// The create is sent in the write's last round trip; the organization it would
			// have made does not exist, and the audit does not name it.
			t.Errorf("the refused create's audit names organization %s", *e.OrganizationID)
		}
		unchanged(t)
	})
	t.Run("400 invalid body", func(t *testing.T) {
		r := send(t, env, req{Method: http.MethodPatch, Path: orgPath(org.ID), Token: writer,
			Body: []byte(`{"display_name": 7}`), Header: headers("If-Match", `"2"`)})
		r.expectProblem(t, http.StatusBadRequest, "invalid_request")
		expectOneAudit(t, env, r, "updateOrganization", "failed", writerID, org.ID, "invalid_request")
		unchanged(t)
	})
	t.Run("403 insufficient_scope", func(t *testing.T) {
		r := send(t, env, patchReq(reader, org.ID, `"2"`, "Not allowed"))
		r.expectProblem(t, http.StatusForbidden, "insufficient_scope")
		expectOneAudit(t, env, r, "updateOrganization", "denied", readerID, org.ID, "insufficient_scope")
		unchanged(t)
		r = send(t, env, createReq(reader, newKey(), jsonBody(map[string]string{"slug": "denied", "display_name": "D"})))
		r.expectProblem(t, http.StatusForbidden, "insufficient_scope")
		expectOneAudit(t, env, r, "createOrganization", "denied", readerID, "", "insufficient_scope")
		unchanged(t)
	})
	// Last: it adds an organization.
	t.Run("409 idempotency_key_reused", func(t *testing.T) {
		k := newKey()
		first := send(t, env, createReq(writer, k, jsonBody(map[string]string{"slug": "keyed", "display_name": "Keyed"})))
		if first.Status != http.StatusCreated {
			t.Fatalf("create: %d %s", first.Status, first.Body)
		}
		var keyed organization
		first.decode(t, &keyed)
		before := countRows(t, env, `SELECT count(*) FROM audit_events`)
		// A replay is not a new attempt.
		if r := send(t, env, createReq(writer, k, jsonBody(map[string]string{"slug": "keyed", "display_name": "Keyed"}))); r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay: %d %s", r.Status, r.Body)
		}
		if n := countRows(t, env, `SELECT count(*) FROM audit_events`); n != before {
			t.Errorf("a replay added %d audit events", n-before)
		}
		r := send(t, env, createReq(writer, k, jsonBody(map[string]string{"slug": "keyed", "display_name": "Changed"})))
		r.expectProblem(t, http.StatusConflict, "idempotency_key_reused")
		expectOneAudit(t, env, r, "createOrganization", "failed", writerID, "", "idempotency_key_reused")
		if o, _ := getOrg(t, env, reader, keyed.ID); o.DisplayName != "Keyed" || o.Version != 1 {
			t.Errorf("organization changed: %+v", o)
		}
	})
	t.Run("reads are not audited", func(t *testing.T) {
		r := send(t, env, req{Method: http.MethodGet, Path: orgPath(org.ID), Token: reader})
		if r.Status != http.StatusOK {
			t.Fatalf("get: %d", r.Status)
		}
		if events := auditByRequest(t, env, r.Header.Get("X-Request-Id")); len(events) != 0 {
			t.Errorf("a read left %d audit events", len(events))
		}
	})
}

func TestAuditListFiltersAndPages(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := context.Background()
	aID, a := scopedToken(t, env, "organizations:write")
	bID, b := scopedToken(t, env, "organizations:write")
	_, readOnly := scopedToken(t, env, "organizations:read")
	_, auditor := scopedToken(t, env, "audit:read")
	c := newClient(t, env, auditor)

	acme := createOrg(t, env, a, "acme", "Acme")
	globex := createOrg(t, env, b, "globex", "Globex")
	send(t, env, patchReq(a, acme.ID, `"1"`, "Acme Inc."))                                                   // succeeded
	send(t, env, patchReq(a, acme.ID, `"1"`, "Stale"))                                                       // failed
	send(t, env, patchReq(b, globex.ID, `"1"`, "Globex Corp."))                                              // succeeded
	send(t, env, patchReq(readOnly, globex.ID, `"2"`, "Denied"))                                             // denied
	send(t, env, createReq(b, newKey(), jsonBody(map[string]string{"slug": "acme", "display_name": "Dup"}))) // failed
	total := countRows(t, env, `SELECT count(*) FROM audit_events`)
	if total != 7 {
		t.Fatalf("%d audit events, want 7", total)
	}

	list := func(t *testing.T, p client.ListAuditEventsParams) []client.AuditEvent {
		t.Helper()
		r, err := c.ListAuditEventsWithResponse(ctx, &p)
		if err != nil || r.JSON200 == nil {
			t.Fatalf("list audit events: %v %d %s", err, r.StatusCode(), r.Body)
		}
		if r.JSON200.NextPageToken != nil {
			t.Fatalf("more than one page of %d events", len(r.JSON200.Items))
		}
		return r.JSON200.Items
	}
	ptr := func(s string) *string { return &s }
	outcome := func(o client.AuditOutcome) *client.AuditOutcome { return &o }

	cases := []struct {
		name   string
		params client.ListAuditEventsParams
		sql    string
		arg    string
		match  func(client.AuditEvent) bool
	}{
		{"organization_id", client.ListAuditEventsParams{OrganizationId: ptr(acme.ID)},
			`organization_id = $1`, acme.ID,
			func(e client.AuditEvent) bool {
				return e.Targets.OrganizationId != nil && *e.Targets.OrganizationId == acme.ID
			}},
		{"operation", client.ListAuditEventsParams{Operation: ptr("updateOrganization")},
			`operation = $1`, "updateOrganization",
			func(e client.AuditEvent) bool { return e.Operation == "updateOrganization" }},
		{"outcome", client.ListAuditEventsParams{Outcome: outcome(client.AuditOutcomeFailed)},
			`outcome = $1`, "failed",
			func(e client.AuditEvent) bool { return e.Outcome == string(client.AuditOutcomeFailed) }},
		{"actor_id", client.ListAuditEventsParams{ActorId: ptr(bID)},
			`actor_id = $1`, bID,
			func(e client.AuditEvent) bool { return e.Actor.Id == bID }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			items := list(t, tc.params)
			want := countRows(t, env, `SELECT count(*) FROM audit_events WHERE `+tc.sql, tc.arg)
			if want == 0 || want == total {
				t.Fatalf("filter %s selects %d of %d events: the setup does not test it", tc.name, want, total)
			}
			if len(items) != want {
				t.Errorf("filter %s: %d events, want %d", tc.name, len(items), want)
			}
			for _, e := range items {
				if !tc.match(e) {
					t.Errorf("filter %s returned %+v", tc.name, e)
				}
			}
		})
	}

	t.Run("combined filters and event fields", func(t *testing.T) {
		items := list(t, client.ListAuditEventsParams{ActorId: ptr(aID), Outcome: outcome(client.AuditOutcomeSucceeded)})
		if len(items) != 2 {
			t.Fatalf("%d succeeded events by token a, want 2", len(items))
		}
		// Newest first.
		upd, crt := items[0], items[1]
		if upd.Operation != "updateOrganization" || crt.Operation != "createOrganization" {
			t.Errorf("order: %s, %s", upd.Operation, crt.Operation)
		}
		if upd.Actor.Type != "operator_token" || upd.Actor.NameSnapshot == "" || upd.Status != 200 ||
			upd.SourceAddress != "127.0.0.1" || upd.RequestId == "" || upd.Error != nil {
			t.Errorf("update event = %+v", upd)
		}
		if upd.Targets.OrganizationNameSnapshot == nil || *upd.Targets.OrganizationNameSnapshot != "Acme Inc." {
			t.Errorf("update event organization_name_snapshot = %v", upd.Targets.OrganizationNameSnapshot)
		}
	})

	t.Run("pagination", func(t *testing.T) {
		pagerID, pager := scopedToken(t, env, "organizations:write")
		for range 5 {
			createOrg(t, env, pager, newSlug(), "Paged")
		}
		rows, err := env.Pool.Query(ctx, `SELECT id FROM audit_events WHERE actor_id = $1 ORDER BY id DESC`, pagerID)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		if len(want) != 5 {
			t.Fatalf("%d events by the pager, want 5", len(want))
		}
		size := 2
		p := client.ListAuditEventsParams{ActorId: &pagerID, PageSize: &size}
		var got []string
		pages := 0
		for {
			r, err := c.ListAuditEventsWithResponse(ctx, &p)
			if err != nil || r.JSON200 == nil {
				t.Fatalf("page %d: %v %d %s", pages+1, err, r.StatusCode(), r.Body)
			}
			pages++
			if len(r.JSON200.Items) > size || len(r.JSON200.Items) == 0 {
				t.Errorf("page %d has %d items", pages, len(r.JSON200.Items))
			}
			for _, e := range r.JSON200.Items {
				got = append(got, e.Id)
			}
			if r.JSON200.NextPageToken == nil {
				break
			}
			if pages > 5 {
				t.Fatal("pagination does not end")
			}
			p.PageToken = r.JSON200.NextPageToken
		}
		if pages != 3 {
			t.Errorf("%d pages of 2 over 5 events, want 3", pages)
		}
		if !slices.Equal(got, want) {
			t.Errorf("paged IDs %v, want %v (no duplicates, no gaps, newest first)", got, want)
		}
	})

	t.Run("bad page tokens", func(t *testing.T) {
		// Garbage, and a well-formed token of another list (organizations).
		foreign := base64.RawURLEncoding.EncodeToString([]byte("v1:" + acme.ID))
		for _, tok := range []string{"garbage", foreign} {
			r := send(t, env, req{Method: http.MethodGet, Path: auditPath + "?page_token=" + tok, Token: auditor})
			r.expectProblem(t, http.StatusBadRequest, "invalid_page_token")
		}
	})
}

func TestAuditActivity(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	writerID, writer := scopedToken(t, env, "organizations:write")

	created := send(t, env, createReq(writer, newKey(), jsonBody(map[string]string{"slug": "acme", "display_name": "Acme"})))
	var org organization
	created.decode(t, &org)
	updated := send(t, env, patchReq(writer, org.ID, `"1"`, "Acme Inc."))
	failed := send(t, env, patchReq(writer, org.ID, `"1"`, "Stale"))
	if created.Status != 201 || updated.Status != 200 || failed.Status != 412 {
		t.Fatalf("setup: %d %d %d", created.Status, updated.Status, failed.Status)
	}

	rows, err := env.Pool.Query(context.Background(), `SELECT request_id, operation, actor_type, actor_id, actor_name, changed_fields
		FROM organization_activity WHERE organization_id = $1 ORDER BY id`, org.ID)
	if err != nil {
		t.Fatal(err)
	}
	type activity struct {
		RequestID, Operation, ActorType, ActorID, ActorName string
		ChangedFields                                       []string
	}
	var got []activity
	for rows.Next() {
		var a activity
		if err := rows.Scan(&a.RequestID, &a.Operation, &a.ActorType, &a.ActorID, &a.ActorName, &a.ChangedFields); err != nil {
			t.Fatal(err)
		}
		got = append(got, a)
	}
	if len(got) != 2 {
		t.Fatalf("%d Activity rows, want 2 (create and update; not the failure): %+v", len(got), got)
	}
	want := []struct{ rid, op string }{
		{created.Header.Get("X-Request-Id"), "createOrganization"},
		{updated.Header.Get("X-Request-Id"), "updateOrganization"},
	}
	for i, a := range got {
		if a.RequestID != want[i].rid || a.Operation != want[i].op || a.ActorType != "operator_token" ||
			a.ActorID != writerID || a.ActorName == "" {
			t.Errorf("Activity %d = %+v, want request %s operation %s by %s", i, a, want[i].rid, want[i].op, writerID)
		}
	}
	if !slices.Equal(got[1].ChangedFields, []string{"display_name"}) {
		t.Errorf("update Activity changed_fields = %v", got[1].ChangedFields)
	}
}

// TestActivityIsTheAuditLog: an organization's Activity, as its owner pages through it, is its
// audit events that changed it (not a failed attempt, not an attempt that changed nothing), each
// under its audit event's ID, newest first, without gaps or duplicates; a page token of the
// Activity entries' former IDs (act_..., before migration 00018) is refused.
// Fails when: the Activity list reads events that are not in the Activity, or pages by another
// ID than the events'.
func TestActivityIsTheAuditLog(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, writer := scopedToken(t, env, "organizations:write")
	_, auditor := scopedToken(t, env, "audit:read")
	created := send(t, env, createReq(writer, newKey(), jsonBody(map[string]string{"slug": newSlug(), "display_name": "Acme"})))
	var org organization
	created.decode(t, &org)
	want := []string{created.Header.Get("X-Request-Id")}
	for i, name := range []string{"Acme 2", "Acme 3", "Acme 4"} {
		r := send(t, env, patchReq(writer, org.ID, fmt.Sprintf(`"%d"`, i+1), name))
		if r.Status != http.StatusOK {
			t.Fatalf("update %d: %d %s", i+1, r.Status, r.Body)
		}
		want = append(want, r.Header.Get("X-Request-Id"))
	}
	if r := send(t, env, patchReq(writer, org.ID, `"1"`, "Stale")); r.Status != http.StatusPreconditionFailed {
		t.Fatalf("stale update: %d %s", r.Status, r.Body)
	}
	if r := send(t, env, patchReq(writer, org.ID, `"4"`, "Acme 4")); r.Status != http.StatusOK {
		t.Fatalf("update that changes nothing: %d %s", r.Status, r.Body)
	}
	slices.Reverse(want) // newest first
	ownerAPIKey := ownerKeyOf(t, env, org.ID)

	// The organization's audit events, by request: the Activity's entries must be these.
	rep := send(t, env, req{Method: http.MethodGet, Path: auditPath + "?organization_id=" + org.ID, Token: auditor})
	var events struct {
		Items []struct {
			ID        string `json:"id"`
			RequestID string `json:"request_id"`
		} `json:"items"`
	}
	rep.decode(t, &events)
	eventOf := map[string]string{}
	for _, e := range events.Items {
		eventOf[e.RequestID] = e.ID
	}
	var got []activityJSON
	path, pages := activityPath+"?page_size=2", 0
	for {
		rep := send(t, env, req{Method: http.MethodGet, Path: path, Token: ownerAPIKey})
		if rep.Status != http.StatusOK {
			t.Fatalf("activity page %d: %d %s", pages+1, rep.Status, rep.Body)
		}
		var page struct {
			Items         []activityJSON `json:"items"`
			NextPageToken *string        `json:"next_page_token"`
		}
		rep.decode(t, &page)
		pages++
		got = append(got, page.Items...)
		if page.NextPageToken == nil || pages > 10 {
			break
		}
		path = activityPath + "?page_size=2&page_token=" + *page.NextPageToken
	}
	var gotRequests []string
	for _, a := range got {
		gotRequests = append(gotRequests, a.RequestID)
		if a.ID != eventOf[a.RequestID] || !strings.HasPrefix(a.ID, "evt_") {
			t.Errorf("Activity entry %s of request %s: its audit event is %q", a.ID, a.RequestID, eventOf[a.RequestID])
		}
	}
	if !slices.Equal(gotRequests, want) {
		t.Errorf("Activity by request %v, want %v (the create and three updates, newest first; not the stale or empty update)", gotRequests, want)
	}
	if pages != 2 {
		t.Errorf("%d pages of 2 over 4 entries, want 2", pages)
	}
	former := base64.RawURLEncoding.EncodeToString([]byte("v1:act_" + strings.TrimPrefix(got[0].ID, "evt_")))
	send(t, env, req{Method: http.MethodGet, Path: activityPath + "?page_token=" + former, Token: ownerAPIKey}).
		expectProblem(t, http.StatusBadRequest, "invalid_page_token")
}

// TestAuditHoldsNoSecrets: no token secret or idempotency key reaches the audit log, Activity,
// the stored idempotency records, the token table or the server's log. Each request's status is
// asserted first: a scan after requests that failed otherwise would prove nothing.
// Fails when: a stored result is replayed without comparing the request's digest ("reused key:
// 201", want 409).
func TestAuditHoldsNoSecrets(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	var secrets []string
	token := func(scopes ...string) (string, string) {
		id, s := scopedToken(t, env, scopes...)
		secrets = append(secrets, s)
		return id, s
	}
	key := func() string {
		k := "idem-" + random(16)
		secrets = append(secrets, k)
		return k
	}
	writerID, writer := token("organizations:write")
	_, reader := token("organizations:read")
	_, auditor := token("audit:read")
	_, revoker := token("deployment:read")

	// Each request is asserted: a scan after requests that failed for another reason would
	// prove nothing about what they would have written.
	expect := func(what string, want int, r reply) reply {
		t.Helper()
		if r.Status != want {
			t.Fatalf("%s: %d %s, want %d", what, r.Status, r.Body, want)
		}
		return r
	}
	c1 := expect("create", http.StatusCreated, send(t, env, createReq(writer, key(), jsonBody(map[string]string{"slug": "acme", "display_name": "Acme"}))))
	var org organization
	c1.decode(t, &org)
	k := key()
	expect("keyed create", http.StatusCreated, send(t, env, createReq(writer, k, jsonBody(map[string]string{"slug": "globex", "display_name": "Globex"}))))
	if r := expect("replay", http.StatusCreated, send(t, env, createReq(writer, k, jsonBody(map[string]string{"slug": "globex", "display_name": "Globex"})))); r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("the replay was not a replay")
	}
	expect("reused key", http.StatusConflict, send(t, env, createReq(writer, k, jsonBody(map[string]string{"slug": "globex", "display_name": "Changed"}))))
	expect("slug taken", http.StatusConflict, send(t, env, createReq(writer, key(), jsonBody(map[string]string{"slug": "acme", "display_name": "Dup"}))))
	p := patchReq(writer, org.ID, `"1"`, "Acme Inc.")
	p.Header.Set("Idempotency-Key", key())
	expect("update", http.StatusOK, send(t, env, p))
	p = patchReq(reader, org.ID, `"2"`, "Denied")
	p.Header.Set("Idempotency-Key", key())
	expect("denied update", http.StatusForbidden, send(t, env, p))
	expect("self-revocation", http.StatusNoContent, send(t, env, req{Method: http.MethodPost, Path: selfPath + "/revoke", Token: revoker}))
	expect("audit read", http.StatusOK, send(t, env, req{Method: http.MethodGet, Path: auditPath, Token: auditor}))
	expect("revoked token", http.StatusUnauthorized, send(t, env, req{Method: http.MethodGet, Path: orgsPath, Token: revoker}))

	var dump strings.Builder
	for _, table := range []string{"audit_events", "organization_activity", "idempotency_keys", "operator_tokens"} {
		rows, err := env.Pool.Query(context.Background(), `SELECT row_to_json(t)::text FROM `+table+` t`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var s string
			if err := rows.Scan(&s); err != nil {
				t.Fatal(err)
			}
			dump.WriteString(s + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	dump.WriteString(env.Logs.String())
	all := dump.String()
	// The dump is not empty: it names the writer and the operations.
	if !strings.Contains(all, writerID) || !strings.Contains(all, "createOrganization") || !strings.Contains(all, "revokeTokenSelf") {
		t.Fatalf("the dump lacks what it should hold:\n%s", all)
	}
	for _, s := range secrets {
		// The secret part alone, without the well-known prefix, must not appear either.
		needle := strings.TrimPrefix(s, "renga_operator_")
		if strings.Contains(all, needle) {
			t.Errorf("a secret (%.24s...) appears in the audit log, Activity, stored records or server log", s)
		}
	}
}
