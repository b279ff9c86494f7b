package bench

import (
	"context"
	"fmt"
	"math"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// phaseWatch records, while a measured phase runs, what else could hold up its requests: in
// PostgreSQL, autovacuum workers (sampled every 100 ms from a connection of the watch's own) and
// checkpoints (pg_stat_bgwriter's counts); in this process, how long runnable goroutines waited
// for a processor and the collector's pauses (runtime/metrics). Beside a tail latency it tells
// waiting for the CPU or the collector apart from waiting on the database's background work.
type phaseWatch struct {
	conn      *pgx.Conn
	stop      chan struct{}
	done      chan struct{}
	samples   int
	vacuuming int            // samples with an autovacuum worker at work
	relations map[string]int // what they worked on: database and command, by samples
	ckpt0     int64
	runtime0  []metrics.Sample
	err       error
}

var phaseMetrics = []string{"/sched/latencies:seconds", "/sched/pauses/total/gc:seconds", "/gc/cycles/total:gc-cycles"}

// watchPhase starts watching; dbURL is any database of the cluster (the catalog views it reads
// are the cluster's).
func watchPhase(t *testing.T, dbURL string) *phaseWatch {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	w := &phaseWatch{conn: conn, stop: make(chan struct{}), done: make(chan struct{}), relations: map[string]int{}}
	if w.ckpt0, err = checkpoints(conn); err != nil {
		t.Fatal(err)
	}
	w.runtime0 = readRuntime()
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
			rows, err := conn.Query(context.Background(),
				"SELECT coalesce(datname, '') || ': ' || query FROM pg_stat_activity WHERE backend_type = 'autovacuum worker' AND query <> ''")
			if err != nil {
				w.err = err
				return
			}
			work, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				w.err = err
				return
			}
			w.samples++
			if len(work) > 0 {
				w.vacuuming++
			}
			for _, q := range work {
				w.relations[q]++
			}
		}
	}()
	return w
}

// finish stops the watch and describes the phase.
func (w *phaseWatch) finish(t *testing.T) string {
	t.Helper()
	close(w.stop)
	<-w.done
	defer w.conn.Close(context.Background())
	if w.err != nil {
		t.Fatal(w.err)
	}
	ckpt, err := checkpoints(w.conn)
	if err != nil {
		t.Fatal(err)
	}
	now := readRuntime()
	sched := histogramSince(w.runtime0[0].Value.Float64Histogram(), now[0].Value.Float64Histogram())
	pauses := histogramSince(w.runtime0[1].Value.Float64Histogram(), now[1].Value.Float64Histogram())
	gcs := now[2].Value.Uint64() - w.runtime0[2].Value.Uint64()
	var work []string
	for q, n := range w.relations {
		work = append(work, fmt.Sprintf("%q in %d", q, n))
	}
	slices.Sort(work)
	vacuum := "none"
	if len(work) > 0 {
		vacuum = strings.Join(work, ", ")
	}
	return fmt.Sprintf("goroutines' wait for a processor p99=%.2fms max=%.2fms; %d collections, pauses p99=%.2fms max=%.2fms; checkpoints begun %d; autovacuum at work in %d of %d samples (%s)",
		quantile(sched, 0.99)*1e3, quantile(sched, 1)*1e3, gcs, quantile(pauses, 0.99)*1e3, quantile(pauses, 1)*1e3,
		ckpt-w.ckpt0, w.vacuuming, w.samples, vacuum)
}

func checkpoints(conn *pgx.Conn) (int64, error) {
	var n int64
	err := conn.QueryRow(context.Background(), "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter").Scan(&n)
	return n, err
}

func readRuntime() []metrics.Sample {
	s := make([]metrics.Sample, len(phaseMetrics))
	for i, name := range phaseMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	return s
}

// histogramSince is the histogram of what b recorded after a (both cumulative, same buckets).
func histogramSince(a, b *metrics.Float64Histogram) *metrics.Float64Histogram {
	d := &metrics.Float64Histogram{Buckets: b.Buckets, Counts: make([]uint64, len(b.Counts))}
	for i := range b.Counts {
		d.Counts[i] = b.Counts[i] - a.Counts[i]
	}
	return d
}

// quantile is the upper bound of the bucket that holds the q-th quantile of h (its lower bound
// where the upper one is infinite); 0 for an empty histogram.
func quantile(h *metrics.Float64Histogram, q float64) float64 {
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	if total == 0 {
		return 0
	}
	want := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, c := range h.Counts {
		seen += c
		if seen >= want && c > 0 {
			if hi := h.Buckets[i+1]; !math.IsInf(hi, 1) {
				return hi
			}
			return h.Buckets[i]
		}
	}
	return h.Buckets[len(h.Buckets)-1]
}

func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	before := &metrics.Float64Histogram{Buckets: []float64{0, 1, 2, 4, inf}, Counts: []uint64{5, 0, 0, 0}}
	after := &metrics.Float64Histogram{Buckets: before.Buckets, Counts: []uint64{95, 0, 9, 1}}
	h := histogramSince(before, after) // 90 in [0,1), 9 in [2,4), 1 in [4,+Inf)
	for _, c := range []struct{ q, want float64 }{{0.5, 1}, {0.9, 1}, {0.91, 4}, {0.99, 4}, {1, 4}} {
		if got := quantile(h, c.q); got != c.want {
			t.Errorf("quantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if got := quantile(&metrics.Float64Histogram{Buckets: []float64{0, 1}, Counts: []uint64{0}}, 0.99); got != 0 {
		t.Errorf("an empty histogram's quantile = %v, want 0", got)
	}
}
