package agent

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Queue is the durable queue of observations, a bbolt database in the state directory. Every
// change is one fsynced transaction, so what Add returned survives kill -9 and power loss.
//
// Observations wait in the observations bucket until the sender forms a batch of the oldest:
// the batch, with a batch_id chosen then, replaces them in one transaction and is sent again,
// byte for byte, until the home answers 202 (accepted or duplicate), so the server's
// deduplication on (installation, batch_id) makes a retry after a lost response harmless.
//
// The queue is bounded by queue_max_bytes (the observations' JSON): when an observation would
// exceed it, the oldest are dropped (a whole batch if the oldest are in one), counted in
// Stats.Dropped, and reported to the caller to log.
type Queue struct {
	db       *bolt.DB
	maxBytes int64
}

var (
	bucketObservations = []byte("observations") // key: sequence; value: the observation's JSON
	bucketBatches      = []byte("batches")      // key: its first observation's sequence; value: storedBatch
	bucketMeta         = []byte("meta")
	metaNextSequence   = []byte("next_sequence")
	metaBytes          = []byte("bytes")
	metaCount          = []byte("count")
	metaDropped        = []byte("dropped")
	metaRejected       = []byte("rejected")
	metaLastSend       = []byte("last_send")
)

// Batch limits: the API takes up to 1,000 observations in at most 1 MiB of body.
const (
	maxBatchObservations = 1000
	maxBatchBytes        = 512 << 10
	// MaxObservationBytes is the largest observation the queue takes.
	MaxObservationBytes = 256 << 10
)

// ErrQueueLocked: another process (a running agent) holds the queue.
var ErrQueueLocked = errors.New("the queue is in use by a running agent")

// Batch is a batch formed from the queue.
type Batch struct {
	key          uint64
	ID           string            `json:"batch_id"`
	Observations []json.RawMessage `json:"observations"`
}

// Stats is what the queue holds and has done.
type Stats struct {
	Depth        int64     `json:"queue_depth"` // observations waiting, in batches or not
	Bytes        int64     `json:"queue_bytes"`
	Dropped      int64     `json:"dropped"`  // dropped to stay under queue_max_bytes
	Rejected     int64     `json:"rejected"` // refused by the home as invalid (400, 413)
	NextSequence uint64    `json:"next_sequence"`
	LastSend     time.Time `json:"last_successful_send"`
}

// OpenQueue opens (creating) the queue in stateDir.
func OpenQueue(stateDir string, maxBytes int64) (*Queue, error) {
	db, err := bolt.Open(filepath.Join(stateDir, queueName), 0o600, &bolt.Options{Timeout: time.Second})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, ErrQueueLocked
	}
	if err != nil {
		return nil, fmt.Errorf("open the queue: %w", err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketObservations, bucketBatches, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &Queue{db: db, maxBytes: maxBytes}, nil
}

// ReadQueueStats reads the stats of a queue no agent holds; ErrQueueLocked when one does.
func ReadQueueStats(stateDir string) (Stats, error) {
	if _, err := os.Stat(filepath.Join(stateDir, queueName)); errors.Is(err, fs.ErrNotExist) {
		return Stats{NextSequence: 1}, nil
	}
	db, err := bolt.Open(filepath.Join(stateDir, queueName), 0o600, &bolt.Options{ReadOnly: true, Timeout: 200 * time.Millisecond})
	if errors.Is(err, berrors.ErrTimeout) {
		return Stats{}, ErrQueueLocked
	}
	if err != nil {
		return Stats{}, err
	}
	defer func() { _ = db.Close() }()
	var s Stats
	err = db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta) == nil {
			return nil
		}
		s = readStats(tx)
		return nil
	})
	return s, err
}

// Close closes the queue's database.
func (q *Queue) Close() error { return q.db.Close() }

func u64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

func key(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

func addMeta(tx *bolt.Tx, name []byte, delta int64) error {
	m := tx.Bucket(bucketMeta)
	return m.Put(name, key(uint64(int64(u64(m.Get(name)))+delta)))
}

func readStats(tx *bolt.Tx) Stats {
	m := tx.Bucket(bucketMeta)
	s := Stats{Depth: int64(u64(m.Get(metaCount))), Bytes: int64(u64(m.Get(metaBytes))), Dropped: int64(u64(m.Get(metaDropped))),
		Rejected: int64(u64(m.Get(metaRejected))), NextSequence: max(1, u64(m.Get(metaNextSequence)))}
	if v := m.Get(metaLastSend); v != nil {
		s.LastSend, _ = time.Parse(time.RFC3339Nano, string(v))
	}
	return s
}

// Stats reads the queue's stats.
func (q *Queue) Stats() (Stats, error) {
	var s Stats
	err := q.db.View(func(tx *bolt.Tx) error { s = readStats(tx); return nil })
	return s, err
}

// Add queues an observation. Its data gets the agent's sequence number ("sequence": 1, 2, ...,
// never reused), so gaps (drops) and duplicates are visible wherever it arrives. It returns the
// sequence and how many older observations were dropped to make room.
func (q *Queue) Add(kind string, observedAt time.Time, data map[string]any) (uint64, int, error) {
	var seq uint64
	dropped := 0
	err := q.db.Update(func(tx *bolt.Tx) error {
		var err error
		seq, dropped, err = q.add(tx, kind, observedAt, data)
		return err
	})
	return seq, dropped, err
}

// AddMany queues observations in one transaction (one fsync), as Add would one by one.
func (q *Queue) AddMany(kind string, observedAt time.Time, data []map[string]any) (int, error) {
	dropped := 0
	err := q.db.Update(func(tx *bolt.Tx) error {
		for _, d := range data {
			_, n, err := q.add(tx, kind, observedAt, d)
			if err != nil {
				return err
			}
			dropped += n
		}
		return nil
	})
	return dropped, err
}

func (q *Queue) add(tx *bolt.Tx, kind string, observedAt time.Time, data map[string]any) (uint64, int, error) {
	m := tx.Bucket(bucketMeta)
	seq := max(1, u64(m.Get(metaNextSequence)))
	d := make(map[string]any, len(data)+1)
	for k, v := range data {
		d[k] = v
	}
	d["sequence"] = seq
	b, err := json.Marshal(map[string]any{"observed_at": observedAt.UTC().Format(time.RFC3339Nano), "kind": kind, "data": d})
	if err != nil {
		return 0, 0, err
	}
	if len(b) > MaxObservationBytes {
		return 0, 0, fmt.Errorf("an observation of %d bytes is over the %d the queue takes", len(b), MaxObservationBytes)
	}
	dropped, err := q.makeRoom(tx, int64(len(b)))
	if err != nil {
		return 0, 0, err
	}
	if err := tx.Bucket(bucketObservations).Put(key(seq), b); err != nil {
		return 0, 0, err
	}
	if err := m.Put(metaNextSequence, key(seq+1)); err != nil {
		return 0, 0, err
	}
	if err := addMeta(tx, metaBytes, int64(len(b))); err != nil {
		return 0, 0, err
	}
	return seq, dropped, addMeta(tx, metaCount, 1)
}

// makeRoom drops the oldest observations (whole batches first: they are older than anything
// not yet in one) until size more bytes fit under the bound.
func (q *Queue) makeRoom(tx *bolt.Tx, size int64) (int, error) {
	dropped := 0
	for int64(u64(tx.Bucket(bucketMeta).Get(metaBytes)))+size > q.maxBytes {
		var n, bytes int64
		if k, v := tx.Bucket(bucketBatches).Cursor().First(); k != nil {
			var b Batch
			if err := json.Unmarshal(v, &b); err != nil {
				return dropped, err
			}
			n, bytes = int64(len(b.Observations)), batchBytes(b.Observations)
			if err := tx.Bucket(bucketBatches).Delete(k); err != nil {
				return dropped, err
			}
		} else if k, v := tx.Bucket(bucketObservations).Cursor().First(); k != nil {
			n, bytes = 1, int64(len(v))
			if err := tx.Bucket(bucketObservations).Delete(k); err != nil {
				return dropped, err
			}
		} else {
			break
		}
		dropped += int(n)
		for name, d := range map[string]int64{string(metaBytes): -bytes, string(metaCount): -n, string(metaDropped): n} {
			if err := addMeta(tx, []byte(name), d); err != nil {
				return dropped, err
			}
		}
	}
	return dropped, nil
}

func batchBytes(obs []json.RawMessage) int64 {
	var n int64
	for _, o := range obs {
		n += int64(len(o))
	}
	return n
}

func newBatchID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "bat_" + hex.EncodeToString(b[:])
}

// NextBatch returns the oldest formed batch, or forms one from the oldest observations (up to
// the API's limits) with a new batch_id, stored before it is returned. ok is false when the
// queue is empty.
func (q *Queue) NextBatch() (b Batch, ok bool, err error) {
	err = q.db.Update(func(tx *bolt.Tx) error {
		if k, v := tx.Bucket(bucketBatches).Cursor().First(); k != nil {
			if err := json.Unmarshal(v, &b); err != nil {
				return err
			}
			b.key, ok = u64(k), true
			return nil
		}
		obs := tx.Bucket(bucketObservations)
		c := obs.Cursor()
		var keys [][]byte
		var size int
		for k, v := c.First(); k != nil && len(b.Observations) < maxBatchObservations && (size == 0 || size+len(v) <= maxBatchBytes); k, v = c.Next() {
			b.Observations = append(b.Observations, append(json.RawMessage(nil), v...))
			keys = append(keys, append([]byte(nil), k...))
			size += len(v)
		}
		if len(keys) == 0 {
			return nil
		}
		for _, k := range keys {
			if err := obs.Delete(k); err != nil {
				return err
			}
		}
		b.ID, b.key, ok = newBatchID(), u64(keys[0]), true
		v, err := json.Marshal(b)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketBatches).Put(keys[0], v)
	})
	return b, ok, err
}

// Sent removes a batch the home answered 202 for, and records the time of the send.
func (q *Queue) Sent(b Batch, at time.Time) error {
	return q.db.Update(func(tx *bolt.Tx) error {
		if err := q.remove(tx, b); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaLastSend, []byte(at.UTC().Format(time.RFC3339Nano)))
	})
}

// Rejected removes a batch the home refused as invalid, counting its observations.
func (q *Queue) Rejected(b Batch) error {
	return q.db.Update(func(tx *bolt.Tx) error {
		if err := q.remove(tx, b); err != nil {
			return err
		}
		return addMeta(tx, metaRejected, int64(len(b.Observations)))
	})
}

// remove deletes a batch if it is still there (making room may have dropped it meanwhile).
func (q *Queue) remove(tx *bolt.Tx, b Batch) error {
	bs := tx.Bucket(bucketBatches)
	if bs.Get(key(b.key)) == nil {
		return nil
	}
	if err := bs.Delete(key(b.key)); err != nil {
		return err
	}
	if err := addMeta(tx, metaBytes, -batchBytes(b.Observations)); err != nil {
		return err
	}
	return addMeta(tx, metaCount, -int64(len(b.Observations)))
}
