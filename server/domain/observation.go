package domain

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain/policyfield"
)

// Observation is one stored observation.
type Observation struct {
	ID             int64           `db:"id"`
	InstallationID string          `db:"installation_id"`
	BatchID        string          `db:"batch_id"`
	ObservedAt     time.Time       `db:"observed_at"`
	ReceivedAt     time.Time       `db:"received_at"`
	Kind           string          `db:"kind"`
	Data           json.RawMessage `db:"data"`
}

// ObservationBatchDedupWindow is how long a batch ID is remembered.
const ObservationBatchDedupWindow = 30 * 24 * time.Hour

// AcceptBatch stores a batch of observations once per (installation, batch ID) and counts the
// request and its bytes in usage, in one statement: the deduplication log is what makes both
// exactly once. It reports whether the batch was new.
func AcceptBatch(ctx context.Context, q db.DBTX, orgID, installationID, batchID string, observations json.RawMessage, bytes int64) (bool, error) {
	var n int
	err := q.QueryRow(ctx, `WITH batch AS (
			INSERT INTO observation_batches (installation_id, batch_id, organization_id) VALUES ($2, $3, $1)
			ON CONFLICT DO NOTHING RETURNING 1),
		stored AS (
			INSERT INTO observations (organization_id, installation_id, batch_id, observed_at, kind, data)
			SELECT $1, $2, $3, (o->>'observed_at')::timestamptz, o->>'kind', o->'data'
			FROM batch, jsonb_array_elements($4::jsonb) o),
		counted AS (
			INSERT INTO usage_counters AS c (organization_id, day, shard, intake_requests, intake_bytes)
			SELECT $1, (now() AT TIME ZONE 'UTC')::date, `+intakeShard+`, 1, $5 FROM batch
			ON CONFLICT (organization_id, day, shard) DO UPDATE SET
				intake_requests = c.intake_requests + 1, intake_bytes = c.intake_bytes + excluded.intake_bytes),
		seen AS (
			UPDATE installations SET last_seen_at = now()
			WHERE id = $2 AND (last_seen_at IS NULL OR last_seen_at < now() - interval '1 minute'))
		SELECT count(*) FROM batch`,
		orgID, installationID, batchID, observations, bytes).Scan(&n)
	return n == 1, err
}

// intakeShard is the usage counter row an intake transaction adds to: one per database
// connection. A connection runs one transaction at a time, so concurrent batches of one
// organization add to different rows and never wait for each other's commit on a counter (with
// a shard per batch, they did: two batches on one shard serialize through the row lock until the
// first's commit is on disk). The total stays exact: each batch adds once, in the statement that
// stores it. A day has at most as many rows per organization as connections that served it.
const intakeShard = `(pg_backend_pid() % 1024)::smallint`

// BatchSeen reports whether a batch was accepted before.
func BatchSeen(ctx context.Context, q db.DBTX, installationID, batchID string) (bool, error) {
	var seen bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM observation_batches WHERE installation_id = $1 AND batch_id = $2)`,
		installationID, batchID).Scan(&seen)
	return seen, err
}

// IntakeTodayLocked serializes the organization's intake for the rest of the transaction and
// returns its intake bytes so far today, as committed by every batch before: the exact check
// of intake_bytes_per_day near the limit. The read is its own statement after the lock.
func IntakeTodayLocked(ctx context.Context, tx pgx.Tx, orgID string) (int64, error) {
	batch := &pgx.Batch{}
	batch.Queue(`SELECT pg_advisory_xact_lock(hashtextextended('intake:' || $1, 0))`, orgID)
	batch.Queue(`SELECT coalesce(sum(intake_bytes), 0)::bigint FROM usage_counters
		WHERE organization_id = $1 AND day = (now() AT TIME ZONE 'UTC')::date`, orgID)
	br := tx.SendBatch(ctx, batch)
	defer func() { _ = br.Close() }()
	if _, err := br.Exec(); err != nil {
		return 0, err
	}
	var n int64
	if err := br.QueryRow().Scan(&n); err != nil {
		return 0, err
	}
	return n, br.Close()
}

// ListObservations pages through an installation's observations, newest first.
func ListObservations(ctx context.Context, q db.DBTX, orgID, installationID string, before int64, limit int) ([]Observation, error) {
	inst, err := getInstallation(ctx, q, installationID)
	if err != nil || inst.OrganizationID != orgID {
		return nil, db.ErrNotFound
	}
	rows, err := q.Query(ctx, `SELECT id, installation_id, batch_id, observed_at, received_at, kind, data FROM observations
		WHERE installation_id = $1 AND ($2 = 0 OR id < $2) ORDER BY id DESC LIMIT $3`, installationID, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Observation])
}

// FormatObservationID is an observation's ID as the API shows it.
func FormatObservationID(id int64) string { return "obs_" + strconv.FormatInt(id, 10) }

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
