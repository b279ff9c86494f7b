package db_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"renga.dev/renga/migrations"
	"renga.dev/renga/server/servertest"
)

// migratedTo returns a new database's pool with the project's migrations applied, then undone
// down to version, and the provider that applied them (to go up or down from there).
func migratedTo(t *testing.T, version int64) (*pgxpool.Pool, *goose.Provider) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, servertest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	sqlDB := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { _ = sqlDB.Close() })
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, version); err != nil {
		t.Fatal(err)
	}
	return pool, p
}

// TestValueListsAsDomains: migration 00017 moves the value lists of an organization's state and
// an audit event's actor type and outcome from CHECK constraints into domains. Applied to a
// schema holding rows, it rewrites neither table (each keeps its storage: the same relfilenode)
// and keeps the rows; afterwards a value outside a list is still refused (check_violation) and
// one inside accepted; and its Down restores the CHECKs.
func TestValueListsAsDomains(t *testing.T) {
	ctx := context.Background()
	pool, p := migratedTo(t, 16)
	exec := func(sql string, args ...any) error {
		_, err := pool.Exec(ctx, sql, args...)
		return err
	}
	insertOrg := `INSERT INTO organizations (id, slug, display_name, state) VALUES ($1, $1, 'Org', $2)`
	insertAudit := `INSERT INTO audit_events (id, time, request_id, actor_type, actor_id, actor_name, operation, outcome, status,
		source_address) VALUES ($1, now(), 'req_1', $2, 'tok_1', 'bench', 'createOrganization', $3, 201, '127.0.0.1')`
	refused := func(what string, err error) {
		t.Helper()
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.CheckViolation {
			t.Errorf("%s: %v, want a check violation", what, err)
		}
	}
	// Before 00017 (its Down applied): the tables' CHECKs refuse.
	refused("state before", exec(insertOrg, "org-bad", "bogus"))
	if err := exec(insertOrg, "org-a", "suspended"); err != nil {
		t.Fatal(err)
	}
	if err := exec(insertAudit, "aud_a", "operator_token", "succeeded"); err != nil {
		t.Fatal(err)
	}
	storage := func() (orgs, audit uint32) {
		t.Helper()
		if err := pool.QueryRow(ctx, `SELECT pg_relation_filenode('organizations'), pg_relation_filenode('audit_events')`).Scan(&orgs, &audit); err != nil {
			t.Fatal(err)
		}
		return orgs, audit
	}
	orgs, audit := storage()
	if _, err := p.UpTo(ctx, 17); err != nil {
		t.Fatal(err)
	}
	if o, a := storage(); o != orgs || a != audit {
		t.Errorf("00017 rewrote a table: organizations %d → %d, audit_events %d → %d", orgs, o, audit, a)
	}
	var state, actorType, outcome string
	if err := pool.QueryRow(ctx, `SELECT o.state, a.actor_type, a.outcome FROM organizations o, audit_events a
		WHERE o.id = 'org-a' AND a.id = 'aud_a'`).Scan(&state, &actorType, &outcome); err != nil {
		t.Fatal(err)
	}
	if state != "suspended" || actorType != "operator_token" || outcome != "succeeded" {
		t.Errorf("rows after 00017: %q %q %q", state, actorType, outcome)
	}
	refused("state", exec(insertOrg, "org-bad", "bogus"))
	refused("actor type", exec(insertAudit, "aud_bad1", "robot", "succeeded"))
	refused("outcome", exec(insertAudit, "aud_bad2", "system", "maybe"))
	refused("state update", exec(`UPDATE organizations SET state = 'bogus' WHERE id = 'org-a'`))
	if err := exec(insertOrg, "org-b", "moved"); err != nil {
		t.Errorf("a listed state: %v", err)
	}
	if err := exec(insertAudit, "aud_b", "support_person", "denied"); err != nil {
		t.Errorf("a listed actor type and outcome: %v", err)
	}
	var checks int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint WHERE contype = 'c'
		AND conname IN ('organizations_state_check', 'audit_events_actor_type_check', 'audit_events_outcome_check')`).Scan(&checks); err != nil {
		t.Fatal(err)
	}
	if checks != 0 {
		t.Errorf("%d of the tables' CHECKs left beside the domains", checks)
	}
}

// TestActivityFromAudit: migration 00018 turns organization_activity into a view of the audit
// events in their organization's Activity. Applied to a schema holding rows, it marks the event of
// each Activity row (and no other: a failed attempt, an event of another organization, one whose
// Activity row is gone), does not rewrite audit_events, and the view shows each entry as before
// under its event's ID, newest first; its Down makes the table again from the view, in the same
// order.
func TestActivityFromAudit(t *testing.T) {
	ctx := context.Background()
	pool, p := migratedTo(t, 17)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO organizations (id, slug, display_name) VALUES ('org_a', 'a', 'A'), ('org_b', 'b', 'B')`)
	event := `INSERT INTO audit_events (id, time, request_id, actor_type, actor_id, actor_name, operation, organization_id,
		outcome, status, changed_fields, source_address) VALUES ($1, $2, $3, 'operator_token', 'tok_1', 'ops', $4, $5, $6, 200, $7, '127.0.0.1')`
	activity := `INSERT INTO organization_activity (id, organization_id, time, request_id, actor_type, actor_id, actor_name,
		operation, changed_fields) VALUES ($1, $2, $3, $4, 'operator_token', 'tok_1', 'ops', $5, $6)`
	t1 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	t2 := t1.Add(time.Minute)
	exec(event, "evt_01", t1, "req_1", "createOrganization", "org_a", "succeeded", []string{"slug", "display_name"})
	exec(activity, "act_01", "org_a", t1, "req_1", "createOrganization", []string{"slug", "display_name"})
	exec(event, "evt_02", t2, "req_2", "putPolicy", "org_a", "succeeded", []string{"limits"})
	exec(activity, "act_02", "org_a", t2, "req_2", "putPolicy", []string{"limits"})
	exec(event, "evt_03", t2, "req_3", "putPolicy", "org_a", "failed", []string{})              // no Activity
	exec(event, "evt_04", t2, "req_4", "suspendOrganization", "org_a", "succeeded", []string{}) // no Activity
	exec(event, "evt_05", t1, "req_5", "createOrganization", "org_b", "succeeded", []string{"slug"})
	exec(activity, "act_05", "org_b", t1, "req_5", "createOrganization", []string{"slug"})
	var audit uint32
	if err := pool.QueryRow(ctx, `SELECT pg_relation_filenode('audit_events')`).Scan(&audit); err != nil {
		t.Fatal(err)
	}

	if _, err := p.UpTo(ctx, 18); err != nil {
		t.Fatal(err)
	}
	var after uint32
	if err := pool.QueryRow(ctx, `SELECT pg_relation_filenode('audit_events')`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if after != audit {
		t.Errorf("00018 rewrote audit_events: %d → %d", audit, after)
	}
	entries := func(org string) []string {
		t.Helper()
		rows, err := pool.Query(ctx, `SELECT id || ' ' || time::text || ' ' || request_id || ' ' || actor_id || ' ' || actor_name
			|| ' ' || operation || ' ' || array_to_string(changed_fields, ',')
			FROM organization_activity WHERE organization_id = $1 ORDER BY id DESC`, org)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	want := []string{"evt_02 2026-12-01 10:01:00+00 req_2 tok_1 ops putPolicy limits",
		"evt_01 2026-12-01 10:00:00+00 req_1 tok_1 ops createOrganization slug,display_name"}
	if got := entries("org_a"); !slices.Equal(got, want) {
		t.Errorf("org_a's Activity after 00018:\n got %q\nwant %q", got, want)
	}
	if got := entries("org_b"); len(got) != 1 || !strings.HasPrefix(got[0], "evt_05 ") {
		t.Errorf("org_b's Activity after 00018: %q", got)
	}
	// The view shows an organization's entries while it is here; its events stay.
	exec(`DELETE FROM organizations WHERE id = 'org_b'`)
	if got := entries("org_b"); len(got) != 0 {
		t.Errorf("a gone organization's Activity: %q", got)
	}
	var events int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE organization_id = 'org_b'`).Scan(&events); err != nil || events != 1 {
		t.Errorf("the gone organization's audit events: %d, %v", events, err)
	}

	if _, err := p.DownTo(ctx, 17); err != nil {
		t.Fatal(err)
	}
	want = []string{"act_02 2026-12-01 10:01:00+00 req_2 tok_1 ops putPolicy limits",
		"act_01 2026-12-01 10:00:00+00 req_1 tok_1 ops createOrganization slug,display_name"}
	if got := entries("org_a"); !slices.Equal(got, want) {
		t.Errorf("org_a's Activity after 00018's Down:\n got %q\nwant %q", got, want)
	}
}
