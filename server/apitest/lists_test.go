package apitest

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"renga.dev/renga/server/servertest"
)

func TestOrganizationListPagesAndFilters(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:write")
	var created []string
	for i := 0; i < 5; i++ {
		created = append(created, createOrg(t, env, token, newSlug(), "Org").ID)
	}
	// Suspend two of them.
	for _, id := range created[:2] {
		send(t, env, req{Method: http.MethodPost, Path: orgPath(id) + "/suspend", Token: token,
			Body: jsonBody(map[string]string{"reason": "test"})}).expectProblemOrOK(t, http.StatusOK)
	}
	type page struct {
		Items []organization `json:"items"`
		Next  *string        `json:"next_page_token"`
	}
	var seen []string
	path := orgsPath + "?page_size=2"
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		var p page
		send(t, env, req{Method: http.MethodGet, Path: path, Token: token}).decode(t, &p)
		for _, o := range p.Items {
			seen = append(seen, o.ID)
		}
		if p.Next == nil {
			break
		}
		path = orgsPath + "?page_size=2&page_token=" + url.QueryEscape(*p.Next)
	}
	if len(seen) != 5 {
		t.Fatalf("pages gave %d organizations, want 5: %v", len(seen), seen)
	}
	for i, id := range created {
		if seen[i] != id {
			t.Errorf("page order: item %d is %s, want %s (creation order)", i, seen[i], id)
		}
	}
	var suspended page
	send(t, env, req{Method: http.MethodGet, Path: orgsPath + "?state=suspended", Token: token}).decode(t, &suspended)
	if len(suspended.Items) != 2 || suspended.Items[0].State != "suspended" {
		t.Errorf("state=suspended gave %+v", suspended.Items)
	}
	var one page
	var slug string
	if err := env.Pool.QueryRow(context.Background(), `SELECT slug FROM organizations WHERE id = $1`, created[3]).Scan(&slug); err != nil {
		t.Fatal(err)
	}
	send(t, env, req{Method: http.MethodGet, Path: orgsPath + "?slug=" + slug, Token: token}).decode(t, &one)
	if len(one.Items) != 1 || one.Items[0].ID != created[3] {
		t.Errorf("slug filter gave %+v", one.Items)
	}
}

func TestAuditTimeRange(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:write", "audit:read")
	createOrg(t, env, token, newSlug(), "Old")
	// Age the first event by a day.
	if _, err := env.Pool.Exec(context.Background(), `UPDATE audit_events SET time = time - interval '1 day'`); err != nil {
		t.Fatal(err)
	}
	cut := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	createOrg(t, env, token, newSlug(), "New")
	type events struct {
		Items []struct {
			Targets struct {
				Name *string `json:"organization_name_snapshot"`
			} `json:"targets"`
		} `json:"items"`
	}
	var since, until events
	send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/audit-events?since=" + url.QueryEscape(cut), Token: token}).decode(t, &since)
	send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/audit-events?until=" + url.QueryEscape(cut), Token: token}).decode(t, &until)
	if len(since.Items) != 1 || *since.Items[0].Targets.Name != "New" {
		t.Errorf("since: %+v", since.Items)
	}
	if len(until.Items) != 1 || *until.Items[0].Targets.Name != "Old" {
		t.Errorf("until: %+v", until.Items)
	}
}

// TestRetentionJobsAreScheduled: the job workers run the idempotency retention on start (and
// hourly), so an expired record goes without anyone calling the function.
func TestRetentionJobsAreScheduled(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:write")
	createOrg(t, env, token, newSlug(), "Keyed")
	if _, err := env.Pool.Exec(context.Background(), `UPDATE idempotency_keys SET expires_at = now() - interval '1 minute'`); err != nil {
		t.Fatal(err)
	}
	env.StartJobs(t)
	deadline := time.Now().Add(20 * time.Second)
	for countRows(t, env, `SELECT count(*) FROM idempotency_keys`) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the expired idempotency record is still there after 20 s of running workers")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
