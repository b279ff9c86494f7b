package db_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"renga.dev/renga/migrations"
	"renga.dev/renga/server/servertest"
)

// TestValueListsAsDomains: migration 00017 moves the value lists of an organization's state and
// an audit event's actor type and outcome from CHECK constraints into domains. Applied to a
// schema holding rows, it rewrites neither table (each keeps its storage: the same relfilenode)
// and keeps the rows; afterwards a value outside a list is still refused (check_violation) and
// one inside accepted; and its Down restores the CHECKs.
func TestValueListsAsDomains(t *testing.T) {
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
	if _, err := p.DownTo(ctx, 16); err != nil {
		t.Fatal(err)
	}
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
