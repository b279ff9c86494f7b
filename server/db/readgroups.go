package db

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ReadGroups sends reads together: reads that arrive while the group's batches are all in
// flight wait, and the next batch carries them together, one round trip (one write to
// PostgreSQL, one wake-up of its backend) for the group instead of one each. With a batch free,
// a read goes alone at once on its request's own context, so a quiet server adds no wait (the
// scheduling: GroupQueue).
//
// A read is a request's statements, queued on its own pgx.Batch, and the function that takes
// their results back, in order. Reads only: a group's statements run one after the other in
// one implicit transaction, each from its own snapshot (read committed), taken after every
// request of the group arrived, so a read sees at least what it would have seen alone (a token
// revoked before its request is revoked for it); and a read nobody waits for anymore may be
// sent again or not at all. A group's batch is sent under the latest of its requests' deadlines and is cancelled once
// every request of it has ended (GroupContext); a request whose context ends gets its error at
// once. A group that PostgreSQL refuses for what a read holds (a statement's own error, not the
// connection's or the server's: see Unavailable) sends each of its reads alone, first in the
// queue, so one read's error is its own; an outage is every read's error at once.
type ReadGroups struct {
	pool BatchSender
	q    *GroupQueue[*readCall] // its slots are the batches in flight at once
}

// ReadStats counts the batches sent and the reads they carried (each once) since the server
// started (Reads/Batches is the mean group), and the reads waiting now.
type ReadStats struct {
	Batches, Reads int64
	Waiting        int
}

// maxGroupReads bounds a group's reads.
const maxGroupReads = 64

type readCall struct {
	Waiter
	batch *pgx.Batch
	read  func(pgx.BatchResults) error
	err   error
}

// BatchSender sends a batch: a pool (*pgxpool.Pool), or a connection.
type BatchSender interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}

// NewReadGroups sends reads through pool, with at most batches of them in flight at once.
func NewReadGroups(pool BatchSender, batches int) *ReadGroups {
	g := &ReadGroups{pool: pool}
	g.q = NewGroupQueue(batches, pickReads, g.send)
	return g
}

// Stats is a snapshot of the counts.
func (g *ReadGroups) Stats() ReadStats {
	batches, reads, waiting := g.q.Counts()
	return ReadStats{Batches: batches, Reads: reads, Waiting: waiting}
}

// Read sends b's statements and calls read with their results (read takes all of them, in
// order, and returns the read's own error, such as ErrNoRows). Its error is the batch's, when
// the batch failed, else read's. read may run on another goroutine than the caller's: it must
// touch nothing but what the caller reads after Read returns nil or read's own error (when Read
// returns ctx's error, read may still run, or have run, on what the caller left).
func (g *ReadGroups) Read(ctx context.Context, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	if g.q.Enter() {
		defer g.q.Release()
		return sendAlone(ctx, g.pool, b, read)
	}
	c := &readCall{Waiter: Waiter{Ctx: ctx}, batch: b, read: read}
	if err := g.q.Wait(c); err != nil {
		return err
	}
	return c.err
}

func sendAlone(ctx context.Context, pool BatchSender, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	br := pool.SendBatch(ctx, b)
	err := read(br)
	if cerr := br.Close(); cerr != nil {
		return cerr
	}
	return err
}

// pickReads takes the next group from the queue, in arrival order: at most maxGroupReads; a read
// to go alone is a group of its own.
func pickReads(queue []*readCall) (group, rest []*readCall) {
	rest = queue[:0]
	for _, c := range queue {
		if len(group) > 0 && (group[0].Alone() || c.Alone() || len(group) == maxGroupReads) {
			rest = append(rest, c)
			continue
		}
		group = append(group, c)
	}
	return group, rest
}

// send sends one group's batch and answers each of its reads.
func (g *ReadGroups) send(group []*readCall) {
	ctx, cancel := GroupContextOf(group)
	defer cancel()
	if len(group) == 1 {
		c := group[0]
		c.err = sendAlone(ctx, g.pool, c.batch, func(br pgx.BatchResults) error { return readSafely(c.read, br) })
		c.Answer()
		return
	}
	n := 0
	for _, c := range group {
		n += len(c.batch.QueuedQueries)
	}
	// Copies of the reads' queries: pgx keeps, on a query it sent, its statement's description,
	// and sends it as that statement again; after a failed batch (whose statements pgx forgets,
	// and deallocates) a read going alone must start from its own, never-sent queries.
	queries := make([]pgx.QueuedQuery, 0, n)
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, n)}
	for _, c := range group {
		for _, q := range c.batch.QueuedQueries {
			queries = append(queries, pgx.QueuedQuery{SQL: q.SQL, Arguments: q.Arguments, Fn: q.Fn})
			b.QueuedQueries[len(queries)-1] = &queries[len(queries)-1]
		}
	}
	br := g.pool.SendBatch(ctx, b)
	// A read whose statements all succeeded is answered at once: what they read stands,
	// whatever a later statement of the batch meets.
	var pending []*readCall
	res := &countedResults{BatchResults: br}
	var misread error
	for _, c := range group {
		if misread != nil {
			// The results are no longer where the reads after it expect them: none of them
			// reads another's.
			c.err = misread
			c.Answer()
			continue
		}
		res.taken = 0
		c.err = readSafely(c.read, res)
		if want := len(c.batch.QueuedQueries); res.taken > want || errors.Is(c.err, errPanicked) {
			misread = errors.Join(fmt.Errorf("db: a read sent with others took %d results for its %d statements", res.taken, want), c.err)
			c.err = misread
		} else {
			for res.taken < want { // results it left (it returned early): not the next read's
				_, _ = res.Exec()
			}
		}
		if c.err == nil || misread != nil {
			c.Answer()
		} else {
			pending = append(pending, c)
		}
	}
	err := br.Close()
	if err != nil && !Unavailable(err) && ctx.Err() == nil && misread == nil {
		// A statement's own error (PostgreSQL skips the rest of a batch after one): each read
		// not answered goes again, alone, first in the queue, and within the batches' count.
		for _, c := range pending {
			c.err = nil
		}
		g.q.Requeue(pending)
		return
	}
	for _, c := range pending {
		if err != nil {
			c.err = err
		}
		c.Answer()
	}
}

// countedResults counts the results a read takes from its group's batch.
type countedResults struct {
	pgx.BatchResults
	taken int
}

func (r *countedResults) Exec() (pgconn.CommandTag, error) { r.taken++; return r.BatchResults.Exec() }
func (r *countedResults) Query() (pgx.Rows, error)         { r.taken++; return r.BatchResults.Query() }
func (r *countedResults) QueryRow() pgx.Row                { r.taken++; return r.BatchResults.QueryRow() }

var errPanicked = errors.New("db: a read panicked")

// readSafely is read(br), with a panic its error: a read sent on another request's goroutine
// must not end the process (alone, on its own, the server's recovery answers it 500).
func readSafely(read func(pgx.BatchResults) error, br pgx.BatchResults) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%w: %v", errPanicked, v)
		}
	}()
	return read(br)
}

// GroupContext is what a statement sent for several requests runs under: no one request's
// cancellation stops it (the others are waiting for it), and it has as long as the request
// with the most time left; once every request has ended, no one waits for it, and it is
// cancelled. ctxs are the requests' contexts (at least one).
func GroupContext(ctxs []context.Context) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctxs[0])
	var ctx context.Context
	var cancel context.CancelFunc
	if last, ok := latestDeadline(ctxs); ok {
		ctx, cancel = context.WithDeadline(base, last)
	} else {
		ctx, cancel = context.WithCancel(base)
	}
	var left atomic.Int64
	left.Store(int64(len(ctxs)))
	stops := make([]func() bool, len(ctxs))
	for i, c := range ctxs {
		stops[i] = context.AfterFunc(c, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// latestDeadline is the latest of ctxs' deadlines; none if one has none.
func latestDeadline(ctxs []context.Context) (time.Time, bool) {
	var last time.Time
	for _, c := range ctxs {
		d, ok := c.Deadline()
		if !ok {
			return time.Time{}, false
		}
		if d.After(last) {
			last = d
		}
	}
	return last, true
}
