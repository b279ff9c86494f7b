package domain

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
)

// lockOrganization reads the organization and locks its row for the rest of the transaction.
// Every state change takes this lock, so a state change and the purge never both win. Lock
// order, everywhere: the organization's row first, then rows that belong to it. (NO KEY UPDATE:
// inserts of its children, which check the foreign key with KEY SHARE, do not wait for it.)
func lockOrganization(ctx context.Context, q db.DBTX, id string) (Organization, error) {
	rows, err := q.Query(ctx, `SELECT `+orgColumns+` FROM organizations WHERE id = $1 FOR NO KEY UPDATE`, id)
	if err != nil {
		return Organization{}, err
	}
	o, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Organization])
	return o, db.Translate(err)
}

func setState(ctx context.Context, q db.DBTX, id, state string, reason *string, purgeAfter *time.Time) (Organization, error) {
	rows, err := q.Query(ctx, `UPDATE organizations SET state = $2, suspended_reason = $3, purge_after = $4,
		version = version + 1, updated_at = now() WHERE id = $1 RETURNING `+orgColumns, id, state, reason, purgeAfter)
	if err != nil {
		return Organization{}, err
	}
	o, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Organization])
	return o, db.Translate(err)
}

// SuspendOrganization suspends an active organization. Suspending a suspended one changes
// nothing (changed is empty).
func SuspendOrganization(ctx context.Context, q db.DBTX, id, reason string) (o Organization, changed []string, err error) {
	o, err = lockOrganization(ctx, q, id)
	if err != nil {
		return o, nil, err
	}
	switch o.State {
	case StateSuspended:
		return o, nil, nil
	case StateActive:
		o, err = setState(ctx, q, id, StateSuspended, &reason, nil)
		return o, []string{"state", "suspended_reason"}, err
	case StatePurging:
		return o, nil, ErrPurgeStarted
	default:
		return o, nil, ErrInvalidState
	}
}

// ResumeOrganization makes an organization active: from suspended, or from deletion_pending
// (cancelling the deletion). Resuming an active one changes nothing.
func ResumeOrganization(ctx context.Context, q db.DBTX, id string) (o Organization, changed []string, err error) {
	o, err = lockOrganization(ctx, q, id)
	if err != nil {
		return o, nil, err
	}
	switch o.State {
	case StateActive:
		return o, nil, nil
	case StateSuspended:
		o, err = setState(ctx, q, id, StateActive, nil, nil)
		return o, []string{"state", "suspended_reason"}, err
	case StateDeletionPending:
		changed = []string{"state", "purge_after"}
		if o.SuspendedReason != nil {
			changed = append(changed, "suspended_reason")
		}
		o, err = setState(ctx, q, id, StateActive, nil, nil)
		return o, changed, err
	case StatePurging:
		return o, nil, ErrPurgeStarted
	default:
		return o, nil, ErrInvalidState
	}
}

// ScheduleDeletion makes the organization deletion_pending until now + grace. Scheduling a
// scheduled deletion changes nothing and keeps the first deadline.
func ScheduleDeletion(ctx context.Context, q db.DBTX, id string, grace time.Duration) (o Organization, changed []string, err error) {
	o, err = lockOrganization(ctx, q, id)
	if err != nil {
		return o, nil, err
	}
	switch o.State {
	case StateDeletionPending:
		return o, nil, nil
	case StatePurging:
		return o, nil, ErrPurgeStarted
	case StateActive, StateSuspended:
		var after time.Time
		if err := q.QueryRow(ctx, `SELECT now() + $1::interval`, grace).Scan(&after); err != nil {
			return o, nil, err
		}
		o, err = setState(ctx, q, id, StateDeletionPending, o.SuspendedReason, &after)
		return o, []string{"state", "purge_after"}, err
	default:
		return o, nil, ErrInvalidState
	}
}

// CancelDeletion returns a deletion_pending organization to the state it had: suspended if it
// has a suspension reason, else active. With no deletion scheduled it changes nothing. It
// takes the same row lock as the purge, so exactly one of them wins.
func CancelDeletion(ctx context.Context, q db.DBTX, id string) (o Organization, changed []string, err error) {
	o, err = lockOrganization(ctx, q, id)
	if err != nil {
		return o, nil, err
	}
	switch o.State {
	case StateDeletionPending:
		state := StateActive
		if o.SuspendedReason != nil {
			state = StateSuspended
		}
		o, err = setState(ctx, q, id, state, o.SuspendedReason, nil)
		return o, []string{"state", "purge_after"}, err
	case StatePurging:
		return o, nil, ErrPurgeStarted
	default:
		return o, nil, nil
	}
}
