package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/servertest"
)

func TestMain(m *testing.M) { servertest.Main(m) }

// sentAlone and batches are trips' statements sent on their own and its batches, each
// statement upper-cased and trimmed.
func sentAlone(trips []servertest.RoundTrip) []string {
	var out []string
	for _, t := range trips {
		if !t.Batch {
			out = append(out, normalized(t.SQL)...)
		}
	}
	return out
}

func batches(trips []servertest.RoundTrip) [][]string {
	var out [][]string
	for _, t := range trips {
		if t.Batch {
			out = append(out, normalized(t.SQL))
		}
	}
	return out
}

func normalized(sql []string) []string {
	out := make([]string, len(sql))
	for i, s := range sql {
		out[i] = strings.ToUpper(strings.TrimSpace(s))
	}
	return out
}

func setup(t *testing.T) (*pgxpool.Pool, *servertest.RoundTrips) {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(servertest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	trace := &servertest.RoundTrips{}
	cfg.ConnConfig.Tracer = trace
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := pool.Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	trace.Take()
	return pool, trace
}

func ids(t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id FROM t ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func batchOf(sqls ...string) *pgx.Batch {
	b := &pgx.Batch{}
	for _, s := range sqls {
		b.Queue(s)
	}
	return b
}

// A write that starts and ends with batches takes three round trips: BEGIN travels with the
// first batch and COMMIT with the last, and nothing is visible before the commit.
func TestWriteTxFoldsBeginAndCommit(t *testing.T) {
	pool, trace := setup(t)
	ctx := context.Background()
	err := db.WithWriteTx(ctx, pool, func(tx *db.WriteTx) (*pgx.Batch, error) {
		if err := tx.SendBatch(ctx, batchOf(`INSERT INTO t VALUES (1)`, `INSERT INTO t VALUES (2)`)).Close(); err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (3)`); err != nil {
			return nil, err
		}
		if got := ids(t, pool); len(got) != 0 {
			t.Errorf("rows visible before the commit: %v", got)
		}
		return batchOf(`INSERT INTO t VALUES (4)`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(t, pool); len(got) != 4 {
		t.Errorf("committed rows = %v, want 1..4", got)
	}
	trips := trace.Take()
	var writeQueries []string
	for _, q := range sentAlone(trips) {
		if !strings.HasPrefix(q, "SELECT ID FROM T") {
			writeQueries = append(writeQueries, q)
		}
	}
	if len(writeQueries) != 1 || writeQueries[0] != "INSERT INTO T VALUES (3)" {
		t.Errorf("statements sent on their own: %q, want only the handler's insert (no BEGIN, no COMMIT)", writeQueries)
	}
	if b := batches(trips); len(b) != 2 || b[0][0] != "BEGIN" || b[1][len(b[1])-1] != "COMMIT" {
		t.Errorf("batches = %q, want BEGIN first in the first and COMMIT last in the last", b)
	}
}

// A failure in the last batch commits nothing, not even the first batch, and leaves the
// connection usable.
func TestWriteTxFailureInLastBatchCommitsNothing(t *testing.T) {
	pool, _ := setup(t)
	ctx := context.Background()
	for i := 0; i < 3; i++ { // more times than the pool would need to hand out a broken connection
		err := db.WithWriteTx(ctx, pool, func(tx *db.WriteTx) (*pgx.Batch, error) {
			if err := tx.SendBatch(ctx, batchOf(`INSERT INTO t VALUES (10)`)).Close(); err != nil {
				return nil, err
			}
			return batchOf(`INSERT INTO t VALUES (11)`, `INSERT INTO t VALUES (11)`), nil
		})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.UniqueViolation {
			t.Fatalf("err = %v, want the unique violation", err)
		}
		if got := ids(t, pool); len(got) != 0 {
			t.Fatalf("rows after a failed write: %v", got)
		}
	}
}

// An error of the write's own (a handler failing, a replay) rolls back what was sent.
func TestWriteTxErrorRollsBack(t *testing.T) {
	pool, _ := setup(t)
	ctx := context.Background()
	mine := errors.New("handler failed")
	err := db.WithWriteTx(ctx, pool, func(tx *db.WriteTx) (*pgx.Batch, error) {
		if err := tx.SendBatch(ctx, batchOf(`INSERT INTO t VALUES (20)`)).Close(); err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES (21)`); err != nil {
			return nil, err
		}
		return nil, mine
	})
	if !errors.Is(err, mine) {
		t.Fatalf("err = %v", err)
	}
	if got := ids(t, pool); len(got) != 0 {
		t.Errorf("rows after an error: %v", got)
	}
}

// With nothing sent before it, the last batch is one implicit transaction: all or nothing.
func TestWriteTxLastBatchAloneIsAtomic(t *testing.T) {
	pool, trace := setup(t)
	ctx := context.Background()
	err := db.WithWriteTx(ctx, pool, func(*db.WriteTx) (*pgx.Batch, error) {
		return batchOf(`INSERT INTO t VALUES (30)`, `INSERT INTO t VALUES (30)`), nil
	})
	if err == nil {
		t.Fatal("a duplicate insert succeeded")
	}
	if got := ids(t, pool); len(got) != 0 {
		t.Errorf("rows after a failed batch: %v", got)
	}
	trace.Take()
	if err := db.WithWriteTx(ctx, pool, func(*db.WriteTx) (*pgx.Batch, error) {
		return batchOf(`INSERT INTO t VALUES (31)`, `INSERT INTO t VALUES (32)`), nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := ids(t, pool); len(got) != 2 {
		t.Errorf("rows = %v", got)
	}
	for _, b := range batches(trace.Take()) {
		for _, q := range b {
			if q == "BEGIN" || q == "COMMIT" {
				t.Errorf("a lone batch was wrapped in %s", q)
			}
		}
	}
}

// The transaction is a real one: a row lock taken in the first batch holds until the commit.
func TestWriteTxHoldsLocksUntilCommit(t *testing.T) {
	pool, _ := setup(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO t VALUES (40)`); err != nil {
		t.Fatal(err)
	}
	err := db.WithWriteTx(ctx, pool, func(tx *db.WriteTx) (*pgx.Batch, error) {
		if err := tx.SendBatch(ctx, batchOf(`SELECT id FROM t WHERE id = 40 FOR UPDATE`)).Close(); err != nil {
			return nil, err
		}
		_, err := pool.Exec(ctx, `SELECT id FROM t WHERE id = 40 FOR UPDATE NOWAIT`)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.LockNotAvailable {
			t.Errorf("another connection locked the row during the write: %v", err)
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `SELECT id FROM t WHERE id = 40 FOR UPDATE NOWAIT`); err != nil {
		t.Errorf("the lock outlived the write: %v", err)
	}
}

func TestWriteTxHasNoNestedTransactions(t *testing.T) {
	pool, _ := setup(t)
	ctx := context.Background()
	_ = db.WithWriteTx(ctx, pool, func(tx *db.WriteTx) (*pgx.Batch, error) {
		if _, err := tx.Begin(ctx); !errors.Is(err, db.ErrNestedTx) {
			t.Errorf("Begin = %v, want ErrNestedTx", err)
		}
		return nil, nil
	})
}
