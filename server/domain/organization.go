package domain

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"renga.dev/renga/server/db"
)

// Organization is a hosted organization.
type Organization struct {
	ID              string     `db:"id"`
	Slug            string     `db:"slug"`
	DisplayName     string     `db:"display_name"`
	State           string     `db:"state"`
	SuspendedReason *string    `db:"suspended_reason"`
	PurgeAfter      *time.Time `db:"purge_after"`
	Version         int64      `db:"version"`
	CreatedAt       time.Time  `db:"created_at"`
	UpdatedAt       time.Time  `db:"updated_at"`
	// MovingTransferID is the export for a move that froze the organization's agent writes.
	MovingTransferID *string `db:"moving_transfer_id"`
}

// Organization states.
const (
	StateActive          = "active"
	StateSuspended       = "suspended"
	StateDeletionPending = "deletion_pending"
	StatePurging         = "purging"
	StateMoved           = "moved"
)

const orgColumns = `id, slug, display_name, state, suspended_reason, purge_after, version, created_at, updated_at, moving_transfer_id`

// CreateOrganization creates an active organization with an empty policy and default settings.
func CreateOrganization(ctx context.Context, q db.DBTX, slug, displayName string) (Organization, error) {
	rows, err := q.Query(ctx, `INSERT INTO organizations (id, slug, display_name) VALUES ($1, $2, $3)
		ON CONFLICT (slug) DO NOTHING RETURNING `+orgColumns, db.NewID("org"), slug, displayName)
	if err != nil {
		return Organization{}, err
	}
	o, err := pgx.CollectExactlyOneRow(rows, scanOrganization)
	if errors.Is(err, pgx.ErrNoRows) {
		return Organization{}, ErrSlugTaken
	}
	return o, db.Translate(err)
}

// DeferredOrganizationCreate is CreateOrganization for a write that knows its transaction's
// now(): the organization it will create (what CreateOrganization would return), and the
// statement that creates it, to send in the write's last round trip (its policy and settings
// are the defaults, at version 1, with no rows until their first write). A taken slug fails
// that statement; SlugTakenError makes ErrSlugTaken of it.
func DeferredOrganizationCreate(slug, displayName string, now time.Time) (Organization, string, []any) {
	o := Organization{ID: db.NewID("org"), Slug: slug, DisplayName: displayName, State: StateActive, Version: 1,
		CreatedAt: now, UpdatedAt: now}
	return o, `INSERT INTO organizations (id, slug, display_name, state, version, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $6)`,
		[]any{o.ID, o.Slug, o.DisplayName, o.State, o.Version, now}
}

// SlugTakenError is ErrSlugTaken when err is the organizations' slug constraint refusing a row;
// otherwise err.
func SlugTakenError(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "organizations_slug_key" {
		return ErrSlugTaken
	}
	return err
}

// GetOrganization reads one organization.
func GetOrganization(ctx context.Context, q db.DBTX, id string) (Organization, error) {
	return collectOrganization(q.Query(ctx, getOrganization, id))
}

const getOrganization = `SELECT ` + orgColumns + ` FROM organizations WHERE id = $1`

// QueueGetOrganization queues GetOrganization on b; the returned function reads its result.
func QueueGetOrganization(b *pgx.Batch, id string) func(pgx.BatchResults) (Organization, error) {
	b.Queue(getOrganization, id)
	return func(br pgx.BatchResults) (Organization, error) { return collectOrganization(br.Query()) }
}

func collectOrganization(rows pgx.Rows, err error) (Organization, error) {
	if err != nil {
		return Organization{}, err
	}
	o, err := pgx.CollectExactlyOneRow(rows, scanOrganization)
	return o, db.Translate(err)
}

// scanOrganization reads a row of orgColumns.
func scanOrganization(row pgx.CollectableRow) (Organization, error) {
	return pgx.RowToStructByName[Organization](row)
}

// OrganizationFilter selects a page of organizations.
type OrganizationFilter struct {
	State, Slug string
	After       string // last ID of the previous page
	Limit       int
}

// ListOrganizations returns up to Limit organizations in ID (creation) order after After.
func ListOrganizations(ctx context.Context, q db.DBTX, f OrganizationFilter) ([]Organization, error) {
	rows, err := q.Query(ctx, `SELECT `+orgColumns+` FROM organizations
		WHERE ($1 = '' OR state = $1) AND ($2 = '' OR slug = $2) AND id > $3
		ORDER BY id LIMIT $4`, f.State, f.Slug, f.After, f.Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanOrganization)
}

// UpdateOrganization sets the display name if the stored version is expected; it returns the
// organization and the names of the fields that changed.
func UpdateOrganization(ctx context.Context, q db.DBTX, id string, expected int64, displayName string) (Organization, []string, error) {
	// Compare and update in one statement; the CTE reads the old value for changed_fields.
	rows, err := q.Query(ctx, `WITH old AS (SELECT display_name FROM organizations WHERE id = $1 AND version = $2 AND state <> 'purging' FOR NO KEY UPDATE)
		UPDATE organizations o SET display_name = $3, version = o.version + 1, updated_at = now()
		FROM old WHERE o.id = $1 AND o.version = $2 AND o.state <> 'purging'
		RETURNING o.id, o.slug, o.display_name, o.state, o.suspended_reason, o.purge_after, o.version, o.created_at,
		  o.updated_at, o.moving_transfer_id, old.display_name AS old_display_name`,
		id, expected, displayName)
	if err != nil {
		return Organization{}, nil, err
	}
	type updated struct {
		Organization
		OldDisplayName string `db:"old_display_name"`
	}
	u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[updated])
	if errors.Is(err, pgx.ErrNoRows) {
		cur, err := GetOrganization(ctx, q, id)
		if err != nil {
			return Organization{}, nil, err
		}
		if cur.State == StatePurging {
			return Organization{}, nil, ErrPurgeStarted
		}
		return Organization{}, nil, &VersionMismatchError{Current: cur.Version}
	}
	if err != nil {
		return Organization{}, nil, err
	}
	changed := []string{}
	if u.OldDisplayName != displayName {
		changed = append(changed, "display_name")
	}
	return u.Organization, changed, nil
}

// lockOrganization reads the organization and locks its row for the rest of the transaction.
// Every state change takes this lock, so a state change and the purge never both win. Lock
// order, everywhere: the organization's row first, then rows that belong to it. (NO KEY UPDATE:
// inserts of its children, which check the foreign key with KEY SHARE, do not wait for it.)
func lockOrganization(ctx context.Context, q db.DBTX, id string) (Organization, error) {
	rows, err := q.Query(ctx, `SELECT `+orgColumns+` FROM organizations WHERE id = $1 FOR NO KEY UPDATE`, id)
	if err != nil {
		return Organization{}, err
	}
	o, err := pgx.CollectExactlyOneRow(rows, scanOrganization)
	return o, db.Translate(err)
}

func setState(ctx context.Context, q db.DBTX, id, state string, reason *string, purgeAfter *time.Time) (Organization, error) {
	rows, err := q.Query(ctx, `UPDATE organizations SET state = $2, suspended_reason = $3, purge_after = $4,
		version = version + 1, updated_at = now() WHERE id = $1 RETURNING `+orgColumns, id, state, reason, purgeAfter)
	if err != nil {
		return Organization{}, err
	}
	o, err := pgx.CollectExactlyOneRow(rows, scanOrganization)
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
