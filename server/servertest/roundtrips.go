package servertest

import (
	"context"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// RoundTrip is one exchange with PostgreSQL: a statement sent alone, or a batch's statements
// (pipelined: one round trip, however many statements).
type RoundTrip struct {
	Batch bool
	SQL   []string
}

// RoundTrips records the round trips of the connections it traces (a pool's
// ConnConfig.Tracer, or StartTraced's tracer), to count them and read their statements.
type RoundTrips struct {
	mu    sync.Mutex
	trips []RoundTrip
}

var _ pgx.BatchTracer = (*RoundTrips)(nil)

func (c *RoundTrips) add(trip RoundTrip) {
	c.mu.Lock()
	c.trips = append(c.trips, trip)
	c.mu.Unlock()
}

// TraceQueryStart records a statement sent alone.
func (c *RoundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.add(RoundTrip{SQL: []string{d.SQL}})
	return ctx
}

// TraceQueryEnd does nothing.
func (c *RoundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart records a batch's statements.
func (c *RoundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	trip := RoundTrip{Batch: true}
	for _, q := range d.Batch.QueuedQueries {
		trip.SQL = append(trip.SQL, q.SQL)
	}
	c.add(trip)
	return ctx
}

// TraceBatchQuery does nothing: TraceBatchStart recorded the batch.
func (c *RoundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd does nothing.
func (c *RoundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// Take returns the round trips recorded since the last Take, and forgets them.
func (c *RoundTrips) Take() []RoundTrip {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.trips
	c.trips = nil
	return out
}

// During returns the round trips made while fn ran (forgetting those before).
func (c *RoundTrips) During(fn func()) []RoundTrip {
	c.Take()
	fn()
	return c.Take()
}

// Statements are the statements of trips, in order.
func Statements(trips []RoundTrip) []string {
	var out []string
	for _, t := range trips {
		out = append(out, t.SQL...)
	}
	return out
}

// String is the round trip's statements, a batch's in brackets.
func (t RoundTrip) String() string {
	s := strings.Join(t.SQL, "; ")
	if t.Batch {
		return "[" + s + "]"
	}
	return s
}
