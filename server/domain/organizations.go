package domain

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

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
}

// Organization states.
const (
	StateActive          = "active"
	StateSuspended       = "suspended"
	StateDeletionPending = "deletion_pending"
	StatePurging         = "purging"
	StateMoved           = "moved"
)

const orgColumns = `id, slug, display_name, state, suspended_reason, purge_after, version, created_at, updated_at`

// CreateOrganization creates an active organization with an empty policy and default settings.
func CreateOrganization(ctx context.Context, q db.DBTX, slug, displayName string) (Organization, error) {
	rows, err := q.Query(ctx, `WITH o AS (
			INSERT INTO organizations (id, slug, display_name) VALUES ($1, $2, $3)
			ON CONFLICT (slug) DO NOTHING RETURNING `+orgColumns+`),
		p AS (INSERT INTO organization_policies (organization_id) SELECT id FROM o),
		s AS (INSERT INTO organization_settings (organization_id) SELECT id FROM o)
		SELECT * FROM o`, db.NewID("org"), slug, displayName)
	if err != nil {
		return Organization{}, err
	}
	o, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Organization])
	if errors.Is(err, pgx.ErrNoRows) {
		return Organization{}, ErrSlugTaken
	}
	return o, db.Translate(err)
}

// GetOrganization reads one organization.
func GetOrganization(ctx context.Context, q db.DBTX, id string) (Organization, error) {
	rows, err := q.Query(ctx, `SELECT `+orgColumns+` FROM organizations WHERE id = $1`, id)
	if err != nil {
		return Organization{}, err
	}
	o, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Organization])
	return o, db.Translate(err)
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
	return pgx.CollectRows(rows, pgx.RowToStructByName[Organization])
}

// UpdateOrganization sets the display name if the stored version is expected; it returns the
// organization and the names of the fields that changed.
func UpdateOrganization(ctx context.Context, q db.DBTX, id string, expected int64, displayName string) (Organization, []string, error) {
	// Compare and update in one statement; the CTE reads the old value for changed_fields.
	rows, err := q.Query(ctx, `WITH old AS (SELECT display_name FROM organizations WHERE id = $1 AND version = $2 AND state <> 'purging' FOR NO KEY UPDATE)
		UPDATE organizations o SET display_name = $3, version = o.version + 1, updated_at = now()
		FROM old WHERE o.id = $1 AND o.version = $2 AND o.state <> 'purging'
		RETURNING o.id, o.slug, o.display_name, o.state, o.suspended_reason, o.purge_after, o.version, o.created_at,
		  o.updated_at, old.display_name AS old_display_name`,
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
