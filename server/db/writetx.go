package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// WriteTx is a transaction whose BEGIN travels with its first statements and whose COMMIT
// travels with its last: a write that starts with a pipelined batch and ends with one takes
// those two round trips and the handler's own, not two more for BEGIN and COMMIT. It is a
// pgx.Tx, so domain functions and River's InsertTx take it as they take any transaction.
type WriteTx struct {
	conn   *pgx.Conn
	begun  bool // BEGIN was sent
	closed bool // committed or rolled back
}

var _ pgx.Tx = (*WriteTx)(nil)

// ErrNestedTx: a WriteTx has no savepoints.
var ErrNestedTx = errors.New("a write's transaction has no nested transactions")

// WithWriteTx runs fn in a WriteTx on a connection of pool. fn returns the statements that end
// the write (possibly none); they are sent with COMMIT in one round trip. When fn or any of those
// statements fails, nothing is committed.
func WithWriteTx(ctx context.Context, pool *pgxpool.Pool, fn func(tx *WriteTx) (*pgx.Batch, error)) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire: %w", err)
	}
	// A connection left inside a transaction (a failed rollback) is destroyed on release, never
	// reused.
	defer conn.Release()
	tx := &WriteTx{conn: conn.Conn()}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	last, err := fn(tx)
	if err != nil {
		return err
	}
	return tx.commitWith(ctx, last)
}

// commitWith sends last and COMMIT in one round trip. Before any statement was sent, last alone
// is one implicit transaction: all of it or none.
func (t *WriteTx) commitWith(ctx context.Context, last *pgx.Batch) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	if last == nil {
		last = &pgx.Batch{}
	}
	if !t.begun && last.Len() == 0 {
		t.closed = true
		return nil
	}
	if t.begun {
		last.Queue("COMMIT")
	}
	if err := t.conn.SendBatch(ctx, last).Close(); err != nil {
		return err // the deferred Rollback ends the failed transaction
	}
	t.closed = true
	return nil
}

// begin sends BEGIN on its own, for a first statement that is not a batch.
func (t *WriteTx) begin(ctx context.Context) error {
	if t.closed {
		return pgx.ErrTxClosed
	}
	if t.begun {
		return nil
	}
	if _, err := t.conn.Exec(ctx, "BEGIN"); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	t.begun = true
	return nil
}

// SendBatch sends b; the first statements of the transaction carry BEGIN with them.
func (t *WriteTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if t.closed {
		return errBatch{pgx.ErrTxClosed}
	}
	if t.begun {
		return t.conn.SendBatch(ctx, b)
	}
	t.begun = true
	withBegin := &pgx.Batch{QueuedQueries: append([]*pgx.QueuedQuery{{SQL: "BEGIN"}}, b.QueuedQueries...)}
	return &afterBegin{BatchResults: t.conn.SendBatch(ctx, withBegin)}
}

// afterBegin reads past BEGIN's result before the caller reads its own.
type afterBegin struct {
	pgx.BatchResults
	read bool
	err  error
}

func (b *afterBegin) skip() error {
	if !b.read {
		b.read = true
		_, b.err = b.BatchResults.Exec()
	}
	return b.err
}

func (b *afterBegin) Exec() (pgconn.CommandTag, error) {
	if err := b.skip(); err != nil {
		return pgconn.CommandTag{}, err
	}
	return b.BatchResults.Exec()
}

func (b *afterBegin) Query() (pgx.Rows, error) {
	if err := b.skip(); err != nil {
		return nil, err
	}
	return b.BatchResults.Query()
}

func (b *afterBegin) QueryRow() pgx.Row {
	if err := b.skip(); err != nil {
		return errRow{err}
	}
	return b.BatchResults.QueryRow()
}

func (b *afterBegin) Close() error {
	err := b.skip()
	if cerr := b.BatchResults.Close(); cerr != nil || err == nil {
		return cerr
	}
	return err
}

type errBatch struct{ err error }

func (e errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, e.err }
func (e errBatch) Query() (pgx.Rows, error)         { return nil, e.err }
func (e errBatch) QueryRow() pgx.Row                { return errRow(e) }
func (e errBatch) Close() error                     { return e.err }
func (e errBatch) Tx() pgx.Tx                       { return nil }

type errRow struct{ err error }

func (e errRow) Scan(...any) error { return e.err }

// Exec implements pgx.Tx.
func (t *WriteTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if err := t.begin(ctx); err != nil {
		return pgconn.CommandTag{}, err
	}
	return t.conn.Exec(ctx, sql, args...)
}

// Query implements pgx.Tx.
func (t *WriteTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.begin(ctx); err != nil {
		return nil, err
	}
	return t.conn.Query(ctx, sql, args...)
}

// QueryRow implements pgx.Tx.
func (t *WriteTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.begin(ctx); err != nil {
		return errRow{err}
	}
	return t.conn.QueryRow(ctx, sql, args...)
}

// CopyFrom implements pgx.Tx.
func (t *WriteTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.begin(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

// Prepare implements pgx.Tx.
func (t *WriteTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	return t.conn.Prepare(ctx, name, sql)
}

// Begin implements pgx.Tx: a write's transaction has no savepoints.
func (t *WriteTx) Begin(context.Context) (pgx.Tx, error) { return nil, ErrNestedTx }

// LargeObjects implements pgx.Tx; a write does not use large objects.
func (t *WriteTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

// Conn implements pgx.Tx.
func (t *WriteTx) Conn() *pgx.Conn { return t.conn }

// Commit implements pgx.Tx: COMMIT on its own (WithWriteTx sends it with the last statements).
func (t *WriteTx) Commit(ctx context.Context) error { return t.commitWith(ctx, nil) }

// Rollback implements pgx.Tx. It is safe to call after a commit or another rollback. A
// rollback that fails leaves the connection inside a transaction, and the pool destroys it.
func (t *WriteTx) Rollback(ctx context.Context) error {
	if t.closed {
		return nil
	}
	t.closed = true
	if !t.begun {
		return nil
	}
	_, err := t.conn.Exec(ctx, "ROLLBACK")
	return err
}
