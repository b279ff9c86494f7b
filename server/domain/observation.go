package domain

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain/policyfield"
)

// Observation is one stored observation.
type Observation struct {
	ID             ObservationID   `db:"id"`
	InstallationID string          `db:"installation_id"`
	BatchID        string          `db:"batch_id"`
	ObservedAt     time.Time       `db:"observed_at"`
	ReceivedAt     time.Time       `db:"received_at"`
	Kind           string          `db:"kind"`
	Data           json.RawMessage `db:"data"`
}

// ObservationBatchDedupWindow is how long a batch ID is remembered.
const ObservationBatchDedupWindow = 30 * 24 * time.Hour

// IntakeBatch is a batch of observations an installation sends.
type IntakeBatch struct {
	OrganizationID, InstallationID, BatchID string
	// Body is the batch as a JSON object whose "observations" member is the array to store, as
	// PostgreSQL's jsonb takes it: the request body as sent, so the server never decodes it to
	// pass it on (PostgreSQL parses it once, as it would the array alone).
	Body  json.RawMessage
	Bytes int64 // what the batch counts against intake_bytes_per_day
	// PublicKey is the key the request's signature was verified with: the statement stores the
	// batch only if it is still the installation's, in OrganizationID (nil: the installation
	// need only be there).
	PublicKey []byte
	// PolicyVersion is the version of the policy the limit was computed from: the statement
	// stores nothing under another version, and answers StalePolicyError (0: not checked).
	PolicyVersion int64
}

// ErrUnknownInstallation: the batch's installation is not (or no longer) in its organization
// with the key its request was verified with.
var ErrUnknownInstallation = errors.New("unknown installation")

// StalePolicyError: the organization's policy changed since the limit a batch was checked
// against was computed; nothing was stored. Compute the limit from Document and send again.
type StalePolicyError struct {
	Version  int64
	Document PolicyDocument
}

func (e *StalePolicyError) Error() string {
	return "the organization's policy changed (version " + strconv.FormatInt(e.Version, 10) + ")"
}

// Pool is what runs a statement and, when it must, a transaction.
type Pool interface {
	db.DBTX
	db.Beginner
}

// SubmitBatch accepts a batch once per (installation, batch ID) within the organization's
// intake_bytes_per_day (limit), and reports whether it was new. Far from the limit (more than
// margin below it: what the batches in flight could add), one statement holds the
// organization's row (FOR SHARE: a suspension, or an export for a move, waits for it, or it sees
// it), checks the organization's state, a move's freeze and today's total, stores the batch and
// counts it: one round trip, no transaction around it. Near the limit, batches serialize on the organization in a
// transaction and read the committed total afresh, so one server never lets the total pass the
// limit. A batch over the limit that was accepted before is still a duplicate, not a 429.
func SubmitBatch(ctx context.Context, pool Pool, b IntakeBatch, limit, margin int64) (bool, error) {
	r, err := acceptBatch(ctx, pool, b, limit-margin)
	return finishBatch(ctx, pool, b, limit, r, err)
}

// finishBatch is SubmitBatch after its first statement (r, err): done when that statement
// accepted the batch or failed; otherwise (the batch near or over the limit) the serialized
// transaction.
func finishBatch(ctx context.Context, pool Pool, b IntakeBatch, limit int64, r accepted, err error) (bool, error) {
	if err != nil || r.accepted {
		return r.fresh, err
	}
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('intake:' || $1, 0))`, b.OrganizationID); err != nil {
			return err
		}
		// Its own statement after the lock: it sees every batch committed before.
		if r, err = acceptBatch(ctx, tx, b, limit); err != nil || r.accepted {
			return err
		}
		if seen, err := BatchSeen(ctx, tx, b.InstallationID, b.BatchID); err != nil || seen {
			return err
		}
		return &DailyLimitError{Limit: policyfield.IntakeBytesPerDay.Name(), Value: limit}
	})
	return r.fresh, err
}

type accepted struct{ accepted, fresh bool }

// acceptBatch stores and counts the batch in one statement if the organization is active and
// today's total plus the batch stays within threshold. accepted is false when it is over.
func acceptBatch(ctx context.Context, q db.DBTX, b IntakeBatch, threshold int64) (accepted, error) {
	var r intakeAnswer
	err := q.QueryRow(ctx, `WITH org AS (
			SELECT state, moving_transfer_id IS NOT NULL AS moving FROM organizations WHERE id = $1 FOR SHARE),
		ins AS (
			SELECT 1 FROM installations WHERE id = $2 AND organization_id = $1 AND ($7::bytea IS NULL OR public_key = $7)),
		pol AS (
			SELECT version, document FROM organization_policies WHERE organization_id = $1),
		current AS (
			SELECT $8::bigint = 0 OR coalesce((SELECT version FROM pol), 1) = $8 AS ok),
		today AS (
			SELECT coalesce(sum(intake_bytes), 0)::bigint AS total FROM usage_counters
			WHERE organization_id = $1 AND day = (now() AT TIME ZONE 'UTC')::date),
		within AS (
			SELECT 1 FROM org, today, current WHERE org.state = 'active' AND NOT org.moving AND today.total + $5 <= $6
				AND current.ok AND EXISTS (SELECT 1 FROM ins)),
		batch AS (
			INSERT INTO observation_batches (installation_id, batch_id, organization_id) SELECT $2, $3, $1 FROM within
			ON CONFLICT DO NOTHING RETURNING `+observationRandom+` AS r),
		stored AS (
			INSERT INTO observations (id, organization_id, installation_id, batch_id, observed_at, kind, data)
			SELECT observation_id(now(), 0, b.r, e.k), $1, $2, $3, (o->>'observed_at')::timestamptz, o->>'kind', o->'data'
			FROM batch b, jsonb_array_elements($4::jsonb -> 'observations') WITH ORDINALITY AS e(o, k)),
		counted AS (
			INSERT INTO usage_counters AS c (organization_id, day, shard, intake_requests, intake_bytes)
			SELECT $1, (now() AT TIME ZONE 'UTC')::date, `+intakeShard+`, 1, $5 FROM batch
			ON CONFLICT (organization_id, day, shard) DO UPDATE SET
				intake_requests = c.intake_requests + 1, intake_bytes = c.intake_bytes + excluded.intake_bytes),
		touched AS (
			SELECT id FROM installations
			WHERE id = $2 AND EXISTS (SELECT 1 FROM within) AND (last_seen_at IS NULL OR last_seen_at < now() - interval '1 minute')
			FOR NO KEY UPDATE SKIP LOCKED),
		seen AS (
			UPDATE installations SET last_seen_at = now() WHERE id IN (SELECT id FROM touched))
		SELECT (SELECT state FROM org), coalesce((SELECT moving FROM org), false), EXISTS (SELECT 1 FROM within),
			EXISTS (SELECT 1 FROM batch), EXISTS (SELECT 1 FROM ins),
			coalesce((SELECT version FROM pol), 1), CASE WHEN NOT (SELECT ok FROM current) THEN coalesce((SELECT document FROM pol), '{}') END`,
		b.OrganizationID, b.InstallationID, b.BatchID, b.Body, b.Bytes, threshold, b.PublicKey, b.PolicyVersion).
		Scan(&r.state, &r.moving, &r.ok, &r.fresh, &r.installed, &r.version, &r.policy)
	if err != nil {
		return accepted{}, err
	}
	return r.outcome()
}

// observationRandom draws a batch's random bits for its observations' IDs (r: see
// observation_id in migration 00020), once per batch (an import's, once per import). An observation's ID is its batch's time
// received (now(), the received_at it gets), the batch's place among its organization's batches
// in the statement (0 alone), these bits and the observation's place in the batch: an
// organization's batches and a batch's observations sort in the order sent, and an ID says
// nothing of another organization's batches.
const observationRandom = `(floor(random() * 2147483648)::bigint << 31) | floor(random() * 2147483648)::bigint`

// intakeAnswer is what an intake statement answers for one batch.
type intakeAnswer struct {
	// busy: a group's statement skipped the organization, whose row another transaction holds
	// (a suspension, a move's freeze); the batch goes alone and waits for it.
	busy                         bool
	state                        *string // nil: no such organization
	moving, ok, fresh, installed bool
	version                      *int64
	policy                       []byte // the current policy, when the batch's was not
}

func (r intakeAnswer) outcome() (accepted, error) {
	switch {
	case r.state == nil:
		return accepted{}, ErrNotFound
	case !r.installed:
		return accepted{}, ErrUnknownInstallation
	}
	if err := agentWritable(*r.state, r.moving); err != nil {
		return accepted{}, err
	}
	if r.policy != nil {
		stale := &StalePolicyError{}
		if r.version != nil {
			stale.Version = *r.version
		}
		if err := json.Unmarshal(r.policy, &stale.Document); err != nil {
			return accepted{}, err
		}
		return accepted{}, stale
	}
	return accepted{accepted: r.ok, fresh: r.fresh}, nil
}

// intakeShard is the usage counter row an intake statement adds to: one per database
// connection, its slot (db.SlotSetting; a connection opened elsewhere than db.Open falls back to
// its backend PID). A connection runs one transaction at a time, so concurrent batches of one
// organization add to different rows and never wait for each other's commit on a counter (with
// a shard per batch, they did: two batches on one shard serialize through the row lock until the
// first's commit is on disk). The total stays exact: each batch adds once, in the statement that
// stores it. A day has at most as many rows per organization as slots that served it: a pool's
// size per server start, where shards by PID grew by one for every connection the pool replaced,
// and each batch sums them.
const intakeShard = `coalesce(nullif(current_setting('` + db.SlotSetting + `', true), '')::smallint, (pg_backend_pid() % 1024)::smallint)`

// BatchSeen reports whether a batch was accepted before.
func BatchSeen(ctx context.Context, q db.DBTX, installationID, batchID string) (bool, error) {
	var seen bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM observation_batches WHERE installation_id = $1 AND batch_id = $2)`,
		installationID, batchID).Scan(&seen)
	return seen, err
}

// ListObservations pages through an installation's observations, newest first (by ID: the
// time received, a batch's in the order sent), from the one before before (nil: the newest).
func ListObservations(ctx context.Context, q db.DBTX, orgID, installationID string, before *ObservationID, limit int) ([]Observation, error) {
	inst, err := getInstallation(ctx, q, installationID)
	if err != nil || inst.OrganizationID != orgID {
		return nil, db.ErrNotFound
	}
	var from any // NULL: from the newest
	if before != nil {
		from = [16]byte(*before)
	}
	rows, err := q.Query(ctx, `SELECT id, installation_id, batch_id, observed_at, received_at, kind, data FROM observations
		WHERE installation_id = $1 AND ($2::uuid IS NULL OR id < $2) ORDER BY id DESC LIMIT $3`, installationID, from, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Observation])
}

// PurgeOldObservations deletes observations older than each organization's effective
// observation_retention_days, and batch IDs older than the deduplication window, in batches.
func PurgeOldObservations(ctx context.Context, q db.DBTX, defaults PolicyDocument, now time.Time) (int64, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT o.organization_id, coalesce(p.document, '{}')
		FROM (SELECT DISTINCT organization_id FROM installations) o
		LEFT JOIN organization_policies p ON p.organization_id = o.organization_id`)
	if err != nil {
		return 0, err
	}
	type orgPolicy struct {
		id  string
		doc PolicyDocument
	}
	var orgs []orgPolicy
	for rows.Next() {
		var op orgPolicy
		var raw []byte
		if err := rows.Scan(&op.id, &raw); err != nil {
			rows.Close()
			return 0, err
		}
		if err := json.Unmarshal(raw, &op.doc); err != nil {
			rows.Close()
			return 0, err
		}
		orgs = append(orgs, op)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var total int64
	deleteAll := func(sql string, args ...any) error {
		for {
			tag, err := q.Exec(ctx, sql, args...)
			if err != nil {
				return err
			}
			total += tag.RowsAffected()
			if tag.RowsAffected() < 5000 {
				return nil
			}
		}
	}
	for _, o := range orgs {
		days := Limit(o.doc, defaults, policyfield.ObservationRetentionDays)
		cutoff := now.Add(-time.Duration(days) * 24 * time.Hour)
		if err := deleteAll(`DELETE FROM observations WHERE id = ANY (ARRAY(
			SELECT id FROM observations WHERE organization_id = $1 AND received_at < $2 LIMIT 5000))`, o.id, cutoff); err != nil {
			return total, err
		}
	}
	err = deleteAll(`DELETE FROM observation_batches WHERE ctid = ANY (ARRAY(
		SELECT ctid FROM observation_batches WHERE received_at < $1 LIMIT 5000))`, now.Add(-ObservationBatchDedupWindow))
	return total, err
}
