package db_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/servertest"
)

// readGroupsFixture is a pool, read groups with one batch in flight at most, and a lock the
// test holds: a read that takes it holds the one batch until the test lets go, so the reads
// sent meanwhile wait, and go together in the next batch.
type readGroupsFixture struct {
	pool   *pgxpool.Pool
	groups *db.ReadGroups
	holder *pgx.Conn // holds advisory lock readGroupsLock
}

const readGroupsLock = 7207

func newReadGroupsFixture(t *testing.T) *readGroupsFixture {
	t.Helper()
	ctx := context.Background()
	url := servertest.NewDatabase(t)
	pool, err := db.Open(ctx, url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	holder, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Close(context.Background()) })
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock($1)", readGroupsLock); err != nil {
		t.Fatal(err)
	}
	return &readGroupsFixture{pool: pool, groups: db.NewReadGroups(pool, 1), holder: holder}
}

// block sends a read that waits for the test's lock, and waits until it holds the one batch;
// the returned channel gives its error once it is answered.
func (f *readGroupsFixture) block(t *testing.T, ctx context.Context) <-chan error {
	t.Helper()
	before := f.groups.Stats().Batches
	done := make(chan error, 1)
	go func() { done <- f.groups.Read(ctx, lockRead(readGroupsLock), execRead) }()
	f.waitFor(t, func(s db.ReadStats) bool { return s.Batches == before+1 })
	return done
}

// lockRead is a read that waits for the advisory lock key (shared).
func lockRead(key int) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue("SELECT pg_advisory_xact_lock_shared($1)", key)
	return b
}

func execRead(br pgx.BatchResults) error { _, err := br.Exec(); return err }

func (f *readGroupsFixture) release(t *testing.T) {
	t.Helper()
	if _, err := f.holder.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", readGroupsLock); err != nil {
		t.Fatal(err)
	}
}

func (f *readGroupsFixture) waitFor(t *testing.T, ok func(db.ReadStats) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok(f.groups.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("read groups never reached the expected state: %+v", f.groups.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// readInt is a read of one integer: sql with the argument i.
func readInt(ctx context.Context, g *db.ReadGroups, sql string, i int) (int, error) {
	b := &pgx.Batch{}
	b.Queue(sql, i)
	var got int
	err := g.Read(ctx, b, func(br pgx.BatchResults) error { return br.QueryRow().Scan(&got) })
	return got, err
}

// sendWaiting sends n reads (sql(i) with argument i) while the batch is held, in order, each
// once the one before waits, and returns their answers once the test lets the batch go.
func (f *readGroupsFixture) sendWaiting(t *testing.T, ctx context.Context, n int, sql func(i int) string) ([]int, []error) {
	t.Helper()
	got, errs := make([]int, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n { // one after the other: the queue in their order
		wg.Go(func() { got[i], errs[i] = readInt(ctx, f.groups, sql(i), i) })
		f.waitFor(t, func(s db.ReadStats) bool { return s.Waiting == i+1 })
	}
	f.release(t)
	wg.Wait()
	return got, errs
}

// TestReadGroupsCarryWaitingReadsTogether: reads that arrive while the one batch is in flight
// go together in the next, one batch, and each gets its own statements' results.
func TestReadGroupsCarryWaitingReadsTogether(t *testing.T) {
	f := newReadGroupsFixture(t)
	ctx := context.Background()
	blocked := f.block(t, ctx)
	got, errs := f.sendWaiting(t, ctx, 40, func(int) string { return "SELECT $1::int * 10" })
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if errs[i] != nil || got[i] != i*10 {
			t.Errorf("read %d: %d, %v; want %d", i, got[i], errs[i], i*10)
		}
	}
	if s := f.groups.Stats(); s.Batches != 2 || s.Reads != 41 || s.Waiting != 0 {
		t.Errorf("stats %+v; want 2 batches (the held read, then the 40 together), 41 reads, none waiting", s)
	}
	// A free batch: the next read goes alone, at once.
	if v, err := readInt(ctx, f.groups, "SELECT $1::int", 5); err != nil || v != 5 {
		t.Errorf("read alone: %d, %v", v, err)
	}
}

// TestReadGroupsOneReadsErrorIsItsOwn: a statement PostgreSQL refuses fails its read alone:
// the reads of its group it held up go again, each alone, and get their results.
func TestReadGroupsOneReadsErrorIsItsOwn(t *testing.T) {
	f := newReadGroupsFixture(t)
	ctx := context.Background()
	blocked := f.block(t, ctx)
	const bad = 7
	got, errs := f.sendWaiting(t, ctx, 20, func(i int) string {
		if i == bad {
			return "SELECT 1 / ($1::int - $1::int)"
		}
		return "SELECT $1::int"
	})
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if i == bad {
			var pgErr *pgconn.PgError
			if !errors.As(errs[i], &pgErr) || pgErr.Code != "22012" {
				t.Errorf("read %d (division by zero): %v; want SQLSTATE 22012", i, errs[i])
			}
			continue
		}
		if errs[i] != nil || got[i] != i {
			t.Errorf("read %d: %d, %v; want %d", i, got[i], errs[i], i)
		}
	}
	// The held read, the group, then the failed read and the 12 after it alone.
	if s := f.groups.Stats(); s.Batches != 2+(20-bad) || s.Reads != 21 {
		t.Errorf("stats %+v; want %d batches, 21 reads", s, 2+(20-bad))
	}
}

// TestReadGroupsOutageIsEveryReads: a batch that loses its connection fails every read it
// carried, with that error (each alone would meet it too), and none goes again.
func TestReadGroupsOutageIsEveryReads(t *testing.T) {
	f := newReadGroupsFixture(t)
	ctx := context.Background()
	blocked := f.block(t, ctx)
	got, errs := f.sendWaiting(t, ctx, 10, func(i int) string {
		if i == 0 { // ends its own connection: the rest of the batch never runs
			return "SELECT pg_terminate_backend(pg_backend_pid())::int + $1::int"
		}
		return "SELECT $1::int"
	})
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if !db.Unavailable(errs[i]) {
			t.Errorf("read %d: %d, %v; want the lost connection's error", i, got[i], errs[i])
		}
	}
	if s := f.groups.Stats(); s.Batches != 2 {
		t.Errorf("stats %+v; want 2 batches: none sent again", s)
	}
	// The pool replaces the connection: the next read works.
	if v, err := readInt(ctx, f.groups, "SELECT $1::int", 3); err != nil || v != 3 {
		t.Errorf("read after the outage: %d, %v", v, err)
	}
}

// TestReadGroupsCancellation: a waiting read whose request ends gets its context's error at
// once, and its group goes on for the others; a group whose requests have all ended is
// cancelled, freeing its batch.
func TestReadGroupsCancellation(t *testing.T) {
	f := newReadGroupsFixture(t)
	ctx := context.Background()
	blocked := f.block(t, ctx)

	// One of three waiting reads ends: answered at once; the other two are answered later.
	gone, cancel := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { _, err := readInt(gone, f.groups, "SELECT $1::int", 1); ended <- err }()
	var wg sync.WaitGroup
	answers := make([]error, 2)
	for i := range answers {
		wg.Go(func() {
			v, err := readInt(ctx, f.groups, "SELECT $1::int", i)
			if err == nil && v != i {
				err = fmt.Errorf("got %d, want %d", v, i)
			}
			answers[i] = err
		})
	}
	f.waitFor(t, func(s db.ReadStats) bool { return s.Waiting == 3 })
	cancel()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ended read: %v; want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiting read whose context ended was not answered at once")
	}
	f.release(t)
	wg.Wait()
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	for i, err := range answers {
		if err != nil {
			t.Errorf("read %d: %v", i, err)
		}
	}

	// A group of reads that wait for another lock the test holds, whose requests all end: its
	// statement is cancelled, and the batch is free again while the lock is still held.
	const other = readGroupsLock + 1
	// Two connections idle in the pool, so that the read after the group finds one while the
	// group's is closed (a cancelled statement's connection is not reused): the read then
	// measures the batch being free, not how fast a new connection starts on a busy machine
	// (5 s were not enough once, with the whole suite running).
	c1, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c1.Release()
	c2.Release()
	if _, err := f.holder.Exec(ctx, "SELECT pg_advisory_lock($1), pg_advisory_lock($2)", readGroupsLock, other); err != nil {
		t.Fatal(err)
	}
	blocked = f.block(t, ctx)
	groupCtx, cancelGroup := context.WithCancel(ctx)
	results := make(chan error, 3)
	for range 3 {
		go func() { results <- f.groups.Read(groupCtx, lockRead(other), execRead) }()
	}
	before := f.groups.Stats().Batches
	f.waitFor(t, func(s db.ReadStats) bool { return s.Waiting == 3 })
	// Let the first read go: the group is sent, and waits for the other lock.
	f.release(t)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	f.waitFor(t, func(s db.ReadStats) bool { return s.Batches == before+1 && s.Waiting == 0 })
	cancelGroup()
	for range 3 {
		if err := <-results; !errors.Is(err, context.Canceled) {
			t.Errorf("read of the ended group: %v; want context.Canceled", err)
		}
	}
	// Were the group's statement not cancelled, the read would wait for as long as the test holds
	// the lock: the bound only keeps that failure from waiting for the test's timeout.
	quick, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	start := time.Now()
	if v, err := readInt(quick, f.groups, "SELECT $1::int", 9); err != nil || v != 9 {
		ps := f.pool.Stat()
		t.Errorf("a read after the ended group, the lock still held: %d, %v after %v; want 9 (the group's statement cancelled); reads %+v; pool: acquired %d, constructing %d, idle %d, total %d",
			v, err, time.Since(start), f.groups.Stats(), ps.AcquiredConns(), ps.ConstructingConns(), ps.IdleConns(), ps.TotalConns())
	}
}

// TestReadGroupsMisbehavingReads: a read that leaves some of its results unread does not hand
// them to the next read of its group; one that panics is answered with an error instead of
// ending the process, and the reads after it in its group get an error, never another's
// results.
func TestReadGroupsMisbehavingReads(t *testing.T) {
	f := newReadGroupsFixture(t)
	ctx := context.Background()
	blocked := f.block(t, ctx)
	type answer struct {
		got int
		err error
	}
	reads := []func() (*pgx.Batch, func(pgx.BatchResults) error, *int){
		func() (*pgx.Batch, func(pgx.BatchResults) error, *int) { // well behaved: 0
			b, v := &pgx.Batch{}, new(int)
			b.Queue("SELECT 0")
			return b, func(br pgx.BatchResults) error { return br.QueryRow().Scan(v) }, v
		},
		func() (*pgx.Batch, func(pgx.BatchResults) error, *int) { // queues 1 and 99, reads 1 only
			b, v := &pgx.Batch{}, new(int)
			b.Queue("SELECT 1")
			b.Queue("SELECT 99")
			return b, func(br pgx.BatchResults) error { return br.QueryRow().Scan(v) }, v
		},
		func() (*pgx.Batch, func(pgx.BatchResults) error, *int) { // well behaved: 2
			b, v := &pgx.Batch{}, new(int)
			b.Queue("SELECT 2")
			return b, func(br pgx.BatchResults) error { return br.QueryRow().Scan(v) }, v
		},
		func() (*pgx.Batch, func(pgx.BatchResults) error, *int) { // panics
			b, v := &pgx.Batch{}, new(int)
			b.Queue("SELECT 3")
			return b, func(br pgx.BatchResults) error { panic("a bug in a read") }, v
		},
		func() (*pgx.Batch, func(pgx.BatchResults) error, *int) { // well behaved, after the panic
			b, v := &pgx.Batch{}, new(int)
			b.Queue("SELECT 4")
			return b, func(br pgx.BatchResults) error { return br.QueryRow().Scan(v) }, v
		},
	}
	answers := make([]answer, len(reads))
	var wg sync.WaitGroup
	for i, mk := range reads {
		wg.Go(func() {
			b, read, v := mk()
			err := f.groups.Read(ctx, b, read)
			answers[i] = answer{*v, err}
		})
		f.waitFor(t, func(s db.ReadStats) bool { return s.Waiting == i+1 })
	}
	f.release(t)
	wg.Wait()
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	for i, want := range []int{0, 1, 2} {
		if answers[i].err != nil || answers[i].got != want {
			t.Errorf("read %d: %+v; want %d", i, answers[i], want)
		}
	}
	for i := 3; i < len(reads); i++ {
		if answers[i].err == nil || answers[i].got != 0 {
			t.Errorf("read %d, at or after the panic: %+v; want an error and nothing read", i, answers[i])
		}
	}
	if v, err := readInt(ctx, f.groups, "SELECT $1::int", 8); err != nil || v != 8 {
		t.Errorf("read after the group: %d, %v", v, err)
	}
}
