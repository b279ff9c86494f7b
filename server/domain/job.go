package domain

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain/policyfield"
)

// Job is a command an owner queued for an agent.
type Job struct {
	ID             string          `db:"id"`
	OrganizationID string          `db:"organization_id"`
	InstallationID string          `db:"installation_id"`
	Command        string          `db:"command"`
	State          string          `db:"state"`
	CreatedAt      time.Time       `db:"created_at"`
	DeliveredAt    *time.Time      `db:"delivered_at"`
	CompletedAt    *time.Time      `db:"completed_at"`
	Result         json.RawMessage `db:"result"`
}

const jobColumns = `id, organization_id, installation_id, command, state, created_at, delivered_at, completed_at, result`

// CreateJob queues a job for one of the organization's installations, if the organization is
// entitled to jobs and below max_jobs_per_day (serialized on the organization's row), and
// counts it in usage.
func CreateJob(ctx context.Context, q db.DBTX, orgID, installationID, command string, defaults PolicyDocument) (Job, error) {
	o, err := lockOrganization(ctx, q, orgID)
	if err != nil {
		return Job{}, err
	}
	policy, err := GetPolicy(ctx, q, o.ID)
	if err != nil {
		return Job{}, err
	}
	if !Entitled(policy.Document, defaults, policyfield.Jobs) {
		return Job{}, &NotEntitledError{Entitlement: policyfield.Jobs.Name()}
	}
	inst, err := getInstallation(ctx, q, installationID)
	if errors.Is(err, db.ErrNotFound) || (err == nil && inst.OrganizationID != orgID) {
		return Job{}, db.ErrNotFound
	}
	if err != nil {
		return Job{}, err
	}
	var today int64
	if err := q.QueryRow(ctx, `SELECT coalesce(sum(jobs_created), 0)::bigint FROM usage_counters
		WHERE organization_id = $1 AND day = (now() AT TIME ZONE 'UTC')::date`, orgID).Scan(&today); err != nil {
		return Job{}, err
	}
	if max := Limit(policy.Document, defaults, policyfield.MaxJobsPerDay); today >= max {
		return Job{}, &DailyLimitError{Limit: policyfield.MaxJobsPerDay.Name(), Value: max}
	}
	rows, err := q.Query(ctx, `INSERT INTO jobs (id, organization_id, installation_id, command) VALUES ($1, $2, $3, $4)
		RETURNING `+jobColumns, db.NewID("job"), orgID, installationID, command)
	if err != nil {
		return Job{}, err
	}
	j, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Job])
	if err != nil {
		return Job{}, err
	}
	_, err = CountUsage(ctx, q, orgID, j.ID, j.CreatedAt, UsageDelta{JobsCreated: 1})
	return j, err
}

// ListJobs pages through an organization's jobs, newest first.
func ListJobs(ctx context.Context, q db.DBTX, orgID, before string, limit int) ([]Job, error) {
	rows, err := q.Query(ctx, `SELECT `+jobColumns+` FROM jobs WHERE organization_id = $1 AND ($2 = '' OR id < $2)
		ORDER BY id DESC LIMIT $3`, orgID, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Job])
}

// PendingJobs returns an installation's jobs not yet completed, oldest first, and marks queued
// ones delivered.
func PendingJobs(ctx context.Context, q db.DBTX, installationID string) ([]Job, error) {
	rows, err := q.Query(ctx, `UPDATE jobs SET state = CASE WHEN state = 'queued' THEN 'delivered' ELSE state END,
			delivered_at = coalesce(delivered_at, now())
		WHERE installation_id = $1 AND state IN ('queued', 'delivered') RETURNING `+jobColumns, installationID)
	if err != nil {
		return nil, err
	}
	jobs, err := pgx.CollectRows(rows, pgx.RowToStructByName[Job])
	if err != nil {
		return nil, err
	}
	// RETURNING has no order: oldest first by ID.
	for i := 1; i < len(jobs); i++ {
		for j := i; j > 0 && jobs[j].ID < jobs[j-1].ID; j-- {
			jobs[j], jobs[j-1] = jobs[j-1], jobs[j]
		}
	}
	return jobs, nil
}

// JobResult is what an agent reports.
type JobResult struct {
	Status   string  `json:"status"`
	ExitCode *int    `json:"exit_code,omitempty"`
	Output   *string `json:"output,omitempty"`
}

// CompleteJob records a job's result once; the same result again is success, another is
// ErrInvalidState.
func CompleteJob(ctx context.Context, q db.DBTX, installationID, jobID string, r JobResult) (Job, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return Job{}, err
	}
	rows, err := q.Query(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1 AND installation_id = $2 FOR UPDATE`, jobID, installationID)
	if err != nil {
		return Job{}, err
	}
	j, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Job])
	if err != nil {
		return Job{}, db.Translate(err)
	}
	if j.State == "succeeded" || j.State == "failed" {
		var stored JobResult
		_ = json.Unmarshal(j.Result, &stored)
		same, _ := json.Marshal(stored)
		if string(same) == string(raw) {
			return j, nil
		}
		return Job{}, ErrInvalidState
	}
	rows, err = q.Query(ctx, `UPDATE jobs SET state = $3, result = $4, completed_at = now(), delivered_at = coalesce(delivered_at, now())
		WHERE id = $1 AND installation_id = $2 RETURNING `+jobColumns, jobID, installationID, r.Status, raw)
	if err != nil {
		return Job{}, err
	}
	return pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Job])
}
