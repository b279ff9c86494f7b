// Package db is the PostgreSQL boundary: the pool, transactions, migrations, identifiers and the
// translation of driver errors into domain errors.
package db

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"
)

// DBTX is what domain functions need: a pool or a transaction.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	// ErrNotFound means no row matched.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a unique constraint refused the row.
	ErrConflict = errors.New("conflict")
)

// Open connects a pool and checks the connection.
func Open(ctx context.Context, url string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	return OpenConfig(ctx, cfg)
}

// OpenConfig connects a pool configured by cfg (a test's, with a tracer) and checks the
// connection.
func OpenConfig(ctx context.Context, cfg *pgxpool.Config) (*pgxpool.Pool, error) {
	numberConnections(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database: %w", err)
	}
	return pool, nil
}

// Beginner starts transactions (a pool or a connection).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// WithTx runs fn in a transaction, committing when fn returns nil.
func WithTx(ctx context.Context, b Beginner, fn func(tx pgx.Tx) error) error {
	tx, err := b.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// Translate maps driver errors to the domain's sentinels; other errors pass through.
func Translate(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrNotFound
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation {
		return fmt.Errorf("%w: %s", ErrConflict, pgErr.ConstraintName)
	}
	return err
}

// crockford is lowercase and in ascending ASCII order, so IDs sort by creation time.
const crockford = "0123456789abcdefghjkmnpqrstvwxyz"

// NewID returns prefix + "_" + 26 characters: 48 bits of milliseconds then 80 random bits, so
// IDs sort by creation time: exactly within one process (an ID made in the same millisecond as
// the process's previous one, or while the clock stands behind it, is that one plus one), to the
// millisecond across processes. Lists in ID order are in creation order (two organizations
// created in one millisecond by one server included); pagination relies on the order being
// stable. IDs are not secrets: consecutive ones may differ by one.
func NewID(prefix string) string {
	hi, lo := randomID(time.Now())
	hi, lo = lastID.after(hi, lo)
	return encodeID(prefix, hi, lo)
}

// NewRequestID returns an ID of NewID's shape for a request that started at t: its milliseconds
// then 80 random bits, without NewID's order within the process. A request ID names a request in
// logs, problem bodies and audit events; nothing lists or pages by it, and the access stage makes
// one for every request, from the time it already read: no clock read and no process-wide lock
// of its own. Its random bits come from the runtime's generator (math/rand/v2: ChaCha8 per
// thread, seeded from the kernel), not crypto/rand's system call: a request ID must be unique,
// and it is no secret (every response shows it).
func NewRequestID(t time.Time) string {
	hi := uint64(t.UnixMilli())<<16 | uint64(mrand.Uint32()&0xffff)
	return encodeID("req", hi, mrand.Uint64())
}

// randomID is an ID's 128 bits: t's milliseconds (48 bits), then 80 random bits.
func randomID(t time.Time) (hi, lo uint64) {
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(t.UnixMilli())<<16)
	if _, err := rand.Read(b[6:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return binary.BigEndian.Uint64(b[0:8]), binary.BigEndian.Uint64(b[8:16])
}

// encodeID writes prefix, "_" and the 128 bits as 26 base32 characters (130 bits, top two
// zero), built in one buffer on the stack: the ID's string is its one allocation (every request
// makes one, its request ID).
func encodeID(prefix string, hi, lo uint64) string {
	var buf [64]byte
	out := buf[:0]
	if len(prefix)+27 > len(buf) {
		out = make([]byte, 0, len(prefix)+27)
	}
	out = append(append(out, prefix...), '_')
	n := len(out)
	out = out[:n+26]
	for i := 25; i >= 0; i-- {
		out[n+i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return string(out)
}

// SQLState returns the SQLSTATE of a PostgreSQL error, or "".
func SQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// Unavailable reports whether err says the database could not be reached or could not serve
// (a connection refused or lost, the server shutting down or starting, out of resources, a
// statement cancelled by its deadline): an infrastructure failure, which the API answers with
// 503, never with a client error.
func Unavailable(err error) bool {
	if err == nil {
		return false
	}
	// A connection that could not be made, whatever the server said (refused, starting up,
	// a database that takes no connections), is the database unreachable.
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || // connection exception
			strings.HasPrefix(pgErr.Code, "53") || // insufficient resources
			strings.HasPrefix(pgErr.Code, "57P") || // admin shutdown, crash shutdown, cannot connect now
			strings.HasPrefix(pgErr.Code, "58") || // system error
			pgErr.Code == pgerrcode.QueryCanceled // a statement past its deadline
	}
	var netErr net.Error
	return errors.As(err, &netErr) || pgconn.Timeout(err) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, puddle.ErrClosedPool) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// SlotSetting is the session setting that numbers a pool's connection: among the pool's open
// connections, no two share a slot, and a closed connection's slot is the next new one's. Rows
// sharded per connection (usage_counters, by intake) are sharded by slot: an organization's day
// has at most as many such rows as a pool had connections open at once (per server start), where
// a shard per backend PID grew a row for each connection the pool ever replaced (it replaces each
// one hourly) and every intake statement summed them all.
const SlotSetting = "renga.slot"

// slotRange bounds slots; each pool starts at a random offset in it, so that two servers' pools
// seldom share shards.
const slotRange = 1024

// closed reports whether c was closed and its resources released (safe while c is in use).
func closed(c *pgx.Conn) bool {
	select {
	case <-c.PgConn().CleanupDone():
		return true
	default:
		return false
	}
}

func numberConnections(cfg *pgxpool.Config) {
	var (
		mu   sync.Mutex
		used = map[int]bool{}
		of   = map[*pgx.Conn]int{}
	)
	var b [2]byte
	_, _ = rand.Read(b[:])
	base := int(binary.BigEndian.Uint16(b[:])) % slotRange
	release := func(c *pgx.Conn) {
		mu.Lock()
		defer mu.Unlock()
		if n, ok := of[c]; ok {
			delete(used, n)
			delete(of, c)
		}
	}
	after, before := cfg.AfterConnect, cfg.BeforeClose
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		mu.Lock()
		// A connection taken out of the pool (Hijack: River's listener) is closed by its taker,
		// and BeforeClose never runs for it: its slot is free once it is closed. Whether it is
		// is read from the channel its close closes: another connection may be in use, or in
		// its own AfterConnect, meanwhile, and IsClosed reads its state without a lock.
		for other, n := range of {
			if closed(other) {
				delete(used, n)
				delete(of, other)
			}
		}
		n := 0
		for used[n] && n < slotRange-1 {
			n++
		}
		used[n], of[c] = true, n
		mu.Unlock()
		slot := strconv.Itoa((base + n) % slotRange)
		if _, err := c.Exec(ctx, "SELECT set_config('"+SlotSetting+"', $1, false)", slot); err != nil {
			release(c)
			return err
		}
		if after != nil {
			if err := after(ctx, c); err != nil {
				release(c)
				return err
			}
		}
		return nil
	}
	cfg.BeforeClose = func(c *pgx.Conn) {
		release(c)
		if before != nil {
			before(c)
		}
	}
}

// lastID is the process's last ID (its 128 bits), which the next one must sort after.
var lastID monotonic

type monotonic struct {
	mu     sync.Mutex
	hi, lo uint64
}

// after returns hi, lo if they sort after the last ID by their milliseconds (the top 48 bits),
// otherwise the last ID plus one; and keeps what it returns as the last.
func (m *monotonic) after(hi, lo uint64) (uint64, uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if hi>>16 <= m.hi>>16 {
		hi, lo = m.hi, m.lo+1
		if lo == 0 {
			hi++
		}
	}
	m.hi, m.lo = hi, lo
	return hi, lo
}
