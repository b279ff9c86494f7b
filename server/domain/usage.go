package domain

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
)

// UsageDelta is what one event adds to its organization's day.
type UsageDelta struct {
	IntakeRequests  int64
	IntakeBytes     int64
	JobsCreated     int64
	TerminalSeconds int64
}

// Usage retention.
const (
	UsageRetentionDays = 400
	// UsageDedupWindow is how long an event's ID is remembered: as long as the daily rows it
	// counts in, so a retry is never counted twice.
	UsageDedupWindow = UsageRetentionDays * 24 * time.Hour
	usageShards      = 8
)

// CountUsage adds d to the organization's usage on at's UTC day, exactly once per eventID
// (the event's own ID: a batch ID, a job ID, a terminal session ID). It returns false when the
// event was already counted. Call it in the transaction that makes the event happen, so that
// a rolled-back event is not counted either. Concurrent events of one organization and day
// spread over a few counter rows instead of updating one hot row.
func CountUsage(ctx context.Context, q db.DBTX, orgID, eventID string, at time.Time, d UsageDelta) (bool, error) {
	shard := usageShard(eventID)
	tag, err := q.Exec(ctx, `WITH event AS (
			INSERT INTO usage_events (organization_id, event_id) VALUES ($1, $2)
			ON CONFLICT DO NOTHING RETURNING 1)
		INSERT INTO usage_counters AS c (organization_id, day, shard, intake_requests, intake_bytes, jobs_created, terminal_seconds)
		SELECT $1, $3, $4, $5, $6, $7, $8 FROM event
		ON CONFLICT (organization_id, day, shard) DO UPDATE SET
			intake_requests = c.intake_requests + excluded.intake_requests,
			intake_bytes = c.intake_bytes + excluded.intake_bytes,
			jobs_created = c.jobs_created + excluded.jobs_created,
			terminal_seconds = c.terminal_seconds + excluded.terminal_seconds`,
		orgID, eventID, at.UTC().Format(time.DateOnly), shard, d.IntakeRequests, d.IntakeBytes, d.JobsCreated, d.TerminalSeconds)
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// usageShard spreads one organization's events of a day over a few counter rows.
func usageShard(eventID string) int16 {
	h := fnv.New32a()
	h.Write([]byte(eventID))
	return int16(h.Sum32() % usageShards)
}

// UsageDay is one organization's usage on one UTC day.
type UsageDay struct {
	Day             time.Time `db:"day"`
	IntakeRequests  int64     `db:"intake_requests"`
	IntakeBytes     int64     `db:"intake_bytes"`
	JobsCreated     int64     `db:"jobs_created"`
	TerminalSeconds int64     `db:"terminal_seconds"`
}

// TerminalMinutes rounds the day's connected seconds up: only here, when presented.
func (u UsageDay) TerminalMinutes() int64 { return (u.TerminalSeconds + 59) / 60 }

// DailyUsage returns one row per day from..to (inclusive), zeros included.
func DailyUsage(ctx context.Context, q db.DBTX, orgID string, from, to time.Time) ([]UsageDay, error) {
	rows, err := q.Query(ctx, `SELECT d::date AS day,
			coalesce(sum(c.intake_requests), 0)::bigint AS intake_requests, coalesce(sum(c.intake_bytes), 0)::bigint AS intake_bytes,
			coalesce(sum(c.jobs_created), 0)::bigint AS jobs_created, coalesce(sum(c.terminal_seconds), 0)::bigint AS terminal_seconds
		FROM generate_series($2::date, $3::date, interval '1 day') d
		LEFT JOIN usage_counters c ON c.organization_id = $1 AND c.day = d::date
		GROUP BY d ORDER BY d`, orgID, from.Format(time.DateOnly), to.Format(time.DateOnly))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[UsageDay])
}

// UsageTotal is one organization's usage summed over a range of days.
type UsageTotal struct {
	OrganizationID  string `db:"organization_id"`
	IntakeRequests  int64  `db:"intake_requests"`
	IntakeBytes     int64  `db:"intake_bytes"`
	JobsCreated     int64  `db:"jobs_created"`
	TerminalMinutes int64  `db:"terminal_minutes"`
}

// UsageTotals sums usage per organization over from..to, paging by organization ID. Terminal
// minutes are rounded up per day, then summed, so totals agree with the daily rows.
func UsageTotals(ctx context.Context, q db.DBTX, from, to time.Time, after string, limit int) ([]UsageTotal, error) {
	rows, err := q.Query(ctx, `SELECT organization_id, sum(intake_requests)::bigint AS intake_requests,
			sum(intake_bytes)::bigint AS intake_bytes, sum(jobs_created)::bigint AS jobs_created,
			sum((terminal_seconds + 59) / 60)::bigint AS terminal_minutes
		FROM (SELECT organization_id, day, sum(intake_requests)::bigint AS intake_requests, sum(intake_bytes)::bigint AS intake_bytes,
				sum(jobs_created)::bigint AS jobs_created, sum(terminal_seconds)::bigint AS terminal_seconds
			FROM usage_counters WHERE day BETWEEN $1::date AND $2::date AND organization_id > $3
			GROUP BY organization_id, day) d
		GROUP BY organization_id ORDER BY organization_id LIMIT $4`,
		from.Format(time.DateOnly), to.Format(time.DateOnly), after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[UsageTotal])
}

// PurgeOldUsage deletes daily rows older than the retention and event IDs older than the
// deduplication window, in small batches.
func PurgeOldUsage(ctx context.Context, q db.DBTX, now time.Time) (int64, error) {
	var total int64
	// Kept: today and the 399 days before it.
	cutoffDay := now.UTC().AddDate(0, 0, -(UsageRetentionDays - 1)).Format(time.DateOnly)
	for _, stmt := range []struct {
		sql string
		arg any
	}{
		{`DELETE FROM usage_counters WHERE ctid = ANY (ARRAY(SELECT ctid FROM usage_counters WHERE day < $1::date LIMIT 5000))`, cutoffDay},
		{`DELETE FROM usage_events WHERE ctid = ANY (ARRAY(SELECT ctid FROM usage_events WHERE recorded_at < $1 LIMIT 5000))`, now.Add(-UsageDedupWindow)},
	} {
		for {
			tag, err := q.Exec(ctx, stmt.sql, stmt.arg)
			if err != nil {
				return total, err
			}
			total += tag.RowsAffected()
			if tag.RowsAffected() < 5000 {
				break
			}
		}
	}
	return total, nil
}
