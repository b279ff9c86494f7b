package db_test

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/domain"
)

// TestObservationIDsMigration: migration 00020 keeps the observations stored before it under
// the IDs they had (obs_<n>, in the order they had, a page token's obs_<n> paging on from
// them), gives the ones stored after IDs of db.NewID's shape that sort after them, in the order
// inserted (one statement's rows too), and its Down gives the newer ones numbers after the
// older ones', in their order.
func TestObservationIDsMigration(t *testing.T) {
	ctx := context.Background()
	pool, p := migratedTo(t, 19)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	const org, ins = "org_a", "ins_a"
	exec(`INSERT INTO organizations (id, slug, display_name) VALUES ($1, 'a', 'A')`, org)
	exec(`INSERT INTO installations (id, organization_id, public_key, hostname, os) VALUES ($1, $2, sha256('k'), 'h', 'linux')`, ins, org)
	insert := `INSERT INTO observations (organization_id, installation_id, batch_id, observed_at, kind, data)
		SELECT $1, $2, 'b', now(), 'k', jsonb_build_object('n', g) FROM generate_series($3::int, $4::int) g`
	exec(insert, org, ins, 1, 3)
	var old []int64
	rows, err := pool.Query(ctx, `SELECT id FROM observations ORDER BY id`)
	if err == nil {
		old, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	}
	if err != nil || len(old) != 3 {
		t.Fatalf("before: %v %v", old, err)
	}

	if _, err := p.UpTo(ctx, 20); err != nil {
		t.Fatal(err)
	}
	exec(insert, org, ins, 4, 40) // one statement's rows
	list := func(before *domain.ObservationID) (ids []string, ns []float64) {
		t.Helper()
		obs, err := domain.ListObservations(ctx, pool, org, ins, before, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range obs {
			ids = append(ids, o.ID.String())
			var n float64
			if err := pool.QueryRow(ctx, `SELECT ($1::jsonb->>'n')::float8`, string(o.Data)).Scan(&n); err != nil {
				t.Fatal(err)
			}
			ns = append(ns, n)
		}
		return ids, ns
	}
	ids, ns := list(nil)
	if len(ids) != 40 {
		t.Fatalf("%d observations after 00020, want 40: %v", len(ids), ids)
	}
	for i, n := range ns {
		if n != float64(40-i) {
			t.Fatalf("newest first: %v", ns)
		}
	}
	shape := regexp.MustCompile(`^obs_[0-7][0-9a-hjkmnp-tv-z]{25}$`)
	for _, id := range ids[:37] {
		if !shape.MatchString(id) {
			t.Errorf("a new observation's ID %q: not of db.NewID's shape", id)
		}
		if back, ok := domain.ParseObservationID(id); !ok || back.String() != id {
			t.Errorf("%q does not read back: %v", id, ok)
		}
	}
	want := []string{"obs_" + itoa(old[2]), "obs_" + itoa(old[1]), "obs_" + itoa(old[0])}
	if !slices.Equal(ids[37:], want) {
		t.Errorf("the observations stored before 00020: %v, want %v", ids[37:], want)
	}
	// A page token's ID from before the migration pages on from it.
	last, ok := domain.ParseObservationID(want[0])
	if !ok {
		t.Fatalf("%q does not parse", want[0])
	}
	if ids, _ := list(&last); !slices.Equal(ids, want[1:]) {
		t.Errorf("after %s: %v, want %v", want[0], ids, want[1:])
	}
	// A new ID pages on from it.
	mid, _ := domain.ParseObservationID(ids[9])
	if got, _ := list(&mid); !slices.Equal(got, ids[10:]) {
		t.Errorf("after %s: %v, want %v", ids[9], got, ids[10:])
	}

	if _, err := p.DownTo(ctx, 19); err != nil {
		t.Fatal(err)
	}
	exec(insert, org, ins, 41, 41)
	rows, err = pool.Query(ctx, `SELECT id, (data->>'n')::int8 FROM observations ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ ID, N int64 }
	back, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil || len(back) != 41 {
		t.Fatalf("after the Down: %v %v", back, err)
	}
	for i, r := range back {
		if r.N != int64(i+1) || (i < 3 && r.ID != old[i]) || (i > 0 && r.ID <= back[i-1].ID) {
			t.Fatalf("after the Down, in ID order: %v (the first three were %v)", back, old)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
