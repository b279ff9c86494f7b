package agent_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"renga.dev/renga/agent"
)

func TestQueueDropsOldestAtTheBound(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	q, err := agent.OpenQueue(dir, agent.MinQueueMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string]any{"blob": strings.Repeat("x", 10_000)}
	totalDropped := 0
	var last uint64
	for range 1000 { // ~10 MB into a 4 MiB queue
		seq, dropped, err := q.Add("test.blob", time.Now(), data)
		if err != nil {
			t.Fatal(err)
		}
		totalDropped += dropped
		last = seq
	}
	st, err := q.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.Bytes > agent.MinQueueMaxBytes || st.Dropped != int64(totalDropped) || st.Depth+st.Dropped != 1000 || totalDropped == 0 {
		t.Errorf("stats %+v, dropped %d", st, totalDropped)
	}
	// What is left is the newest, in order.
	b, ok, err := q.NextBatch()
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	var first struct {
		Data struct{ Sequence uint64 } `json:"data"`
	}
	if err := json.Unmarshal(b.Observations[0], &first); err != nil {
		t.Fatal(err)
	}
	if first.Data.Sequence != last-uint64(st.Depth)+1 {
		t.Errorf("oldest kept %d, newest %d, depth %d", first.Data.Sequence, last, st.Depth)
	}
	// A formed batch is the oldest: it goes first when room is needed.
	for range 400 {
		if _, _, err := q.Add("test.blob", time.Now(), data); err != nil {
			t.Fatal(err)
		}
	}
	if err := q.Sent(b, time.Now()); err != nil { // dropped meanwhile: nothing to remove
		t.Fatal(err)
	}
	st2, _ := q.Stats()
	if st2.Depth+st2.Dropped != 1400 || st2.Bytes > agent.MinQueueMaxBytes {
		t.Errorf("after more: %+v", st2)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened, it holds the same.
	q, err = agent.OpenQueue(dir, agent.MinQueueMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	st3, _ := q.Stats()
	if st3.Depth != st2.Depth || st3.Bytes != st2.Bytes || st3.NextSequence != 1401 {
		t.Errorf("reopened: %+v, was %+v", st3, st2)
	}
}

// A batch keeps its batch_id across retries (and restarts): the home's deduplication then
// makes a retry after a lost response harmless. It leaves the queue only on 202.
func TestBatchIDFixedAcrossRetries(t *testing.T) {
	t.Parallel()
	d := newFakeDeployment(t, newRegistry(), testKey(""))
	var failures atomic.Int32
	d.answer("/api/v1/agent/observations", func(w http.ResponseWriter) bool {
		if failures.Add(1) <= 3 {
			problemJSON(w, 503, "unavailable")
			return true
		}
		return false
	})
	cfg := testConfig(t, d.URL, testKey(""))
	cfg.Interval = time.Hour // one observation, at start
	r := start(t, cfg, nil)
	eventually(t, "the batch accepted", func() bool { return len(d.sequences()) == 1 })
	r.stop()
	var ids []string
	for _, q := range d.rec.all() {
		if q.Path == "/api/v1/agent/observations" {
			var b struct {
				BatchID string `json:"batch_id"`
			}
			_ = json.Unmarshal(q.Body, &b)
			ids = append(ids, b.BatchID)
		}
	}
	if len(ids) != 4 || ids[0] != ids[3] || ids[1] != ids[0] || !strings.HasPrefix(ids[0], "bat_") {
		t.Errorf("batch IDs sent: %v", ids)
	}
	// 503 is retried at the home: it never makes the agent resolve again.
	if n := d.rec.count(http.MethodGet, "/api/v1/agent/home"); n != 1 {
		t.Errorf("%d home requests, want 1", n)
	}
	st, _ := agent.ReadQueueStats(cfg.StateDir)
	if st.Depth != 0 || st.LastSend.IsZero() {
		t.Errorf("after the 202: %+v", st)
	}
}

// A batch already accepted whose 202 was lost is sent again after a restart with the same
// batch_id, answered as a duplicate and stored once.
func TestLostResponseIsADuplicate(t *testing.T) {
	t.Parallel()
	d := newFakeDeployment(t, newRegistry(), testKey(""))
	cfg := testConfig(t, d.URL, testKey(""))
	cfg.Interval = time.Hour
	// A first run, then a batch formed and accepted by the home whose 202 the agent never
	// recorded (as a kill -9 between the two would leave it).
	r := start(t, cfg, nil)
	eventually(t, "accepted", func() bool { return len(d.sequences()) == 1 })
	eventually(t, "the 202 recorded", func() bool { st, _ := r.Queue().Stats(); return st.Depth == 0 })
	r.stop()
	q, err := agent.OpenQueue(cfg.StateDir, cfg.QueueMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := q.Add("test.tick", time.Now(), map[string]any{}); err != nil {
		t.Fatal(err)
	}
	b, _, err := q.NextBatch() // formed, as a crash after sending would leave it
	if err != nil {
		t.Fatal(err)
	}
	_ = q.Close()
	d.mu.Lock()
	d.batches[b.ID] = 1 // the home had accepted and stored it
	d.accepted = append(d.accepted, b.Observations...)
	d.mu.Unlock()
	r = start(t, cfg, nil)
	eventually(t, "the resend", func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.batches[b.ID] == 2
	})
	eventually(t, "the queue empty", func() bool { st, _ := r.Queue().Stats(); return st.Depth == 0 })
	r.stop()
	if got := d.sequences(); len(got) != 3 || got[0] != 1 || got[1] != 2 || got[2] != 3 {
		t.Errorf("stored sequences %v, want [1 2 3] (the resent batch once)", got)
	}
}

// A batch is at most 1,000 observations.
func TestBatchLimit(t *testing.T) {
	t.Parallel()
	q, err := agent.OpenQueue(t.TempDir(), agent.MinQueueMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	data := make([]map[string]any, 1500)
	for i := range data {
		data[i] = map[string]any{}
	}
	if _, err := q.AddMany("test.tick", time.Now(), data); err != nil {
		t.Fatal(err)
	}
	b, ok, err := q.NextBatch()
	if err != nil || !ok || len(b.Observations) != 1000 {
		t.Fatalf("first batch: %d observations, %v %v", len(b.Observations), ok, err)
	}
	again, _, _ := q.NextBatch()
	if again.ID != b.ID {
		t.Errorf("the formed batch is not the one returned again: %s, %s", again.ID, b.ID)
	}
	if err := q.Sent(b, time.Now()); err != nil {
		t.Fatal(err)
	}
	b2, ok, err := q.NextBatch()
	if err != nil || !ok || len(b2.Observations) != 500 || b2.ID == b.ID {
		t.Errorf("second batch: %d observations, %v %v", len(b2.Observations), ok, err)
	}
}

// A batch the home refuses as invalid can never be accepted: it is dropped and counted, and
// the next one goes.
func TestRejectedBatchDroppedAndCounted(t *testing.T) {
	t.Parallel()
	d := newFakeDeployment(t, newRegistry(), testKey(""))
	var refused atomic.Int32
	d.answer("/api/v1/agent/observations", func(w http.ResponseWriter) bool {
		if refused.Add(1) == 1 {
			problemJSON(w, 400, "invalid_request")
			return true
		}
		return false
	})
	r := start(t, testConfig(t, d.URL, testKey("")), nil)
	eventually(t, "later batches accepted", func() bool { return len(d.sequences()) >= 2 })
	r.stop()
	st, err := agent.ReadQueueStats(r.cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	// The refused batch held what was collected before the first send (one observation, or
	// more on a busy machine): those are counted rejected, and the accepted ones follow them.
	if st.Rejected < 1 || d.sequences()[0] != int(st.Rejected)+1 || refused.Load() < 2 {
		t.Errorf("rejected %d, accepted %v, %d batches sent", st.Rejected, d.sequences(), refused.Load())
	}
	if !r.logged("the home refused a batch as invalid: dropped") {
		t.Errorf("not logged:\n%s", r.logs.String())
	}
}

// 429 waits for Retry-After, even when the back-off would retry sooner.
func TestTooManyRequestsWaitsForRetryAfter(t *testing.T) {
	t.Parallel()
	d := newFakeDeployment(t, newRegistry(), testKey(""))
	var refused atomic.Int32
	d.answer("/api/v1/agent/observations", func(w http.ResponseWriter) bool {
		if refused.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			problemJSON(w, 429, "limit_exceeded")
			return true
		}
		return false
	})
	r := start(t, testConfig(t, d.URL, testKey("")), nil)
	eventually(t, "accepted after the wait", func() bool { return len(d.sequences()) >= 1 })
	r.stop()
	var times []time.Time
	for _, q := range d.rec.all() {
		if q.Path == "/api/v1/agent/observations" {
			times = append(times, q.At)
		}
	}
	if len(times) < 2 || times[1].Sub(times[0]) < 900*time.Millisecond {
		t.Errorf("retried after %v, want Retry-After's 1 s", times[1].Sub(times[0]))
	}
	if d.rec.count(http.MethodGet, "/api/v1/agent/home") != 1 {
		t.Errorf("429 made the agent resolve again")
	}
}

// TestStatusRefreshedDuringABackOff: while the agent waits out a Retry-After (or a back-off),
// what it collects still shows in `renga agent status` (status.json), without a request.
//
// Fails when: status.json is written only after a send attempt (it then shows the depth of
// the refused attempt for the whole wait).
func TestStatusRefreshedDuringABackOff(t *testing.T) {
	t.Parallel()
	d := newFakeDeployment(t, newRegistry(), testKey(""))
	d.answer("/api/v1/agent/observations", func(w http.ResponseWriter) bool {
		w.Header().Set("Retry-After", "60")
		problemJSON(w, 429, "limit_exceeded")
		return true
	})
	cfg := testConfig(t, d.URL, testKey(""))
	start(t, cfg, nil)
	eventually(t, "a refused batch", func() bool { return d.rec.count(http.MethodPost, "/api/v1/agent/observations") == 1 })
	first, err := agent.ReadStatus(cfg.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "status.json showing what was collected since", func() bool {
		s, err := agent.ReadStatus(cfg.StateDir)
		if err != nil {
			t.Fatal(err)
		}
		return s.Depth >= first.Depth+3 && s.AsOf.After(first.AsOf)
	})
	if n := d.rec.count(http.MethodPost, "/api/v1/agent/observations"); n != 1 {
		t.Errorf("%d sends during a Retry-After of 60 s", n)
	}
}
