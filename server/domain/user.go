package domain

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"renga.dev/renga/server/db"
)

// User is a person; users are shared by the organizations they belong to.
type User struct {
	ID          string    `db:"id"`
	Email       string    `db:"email"`
	DisplayName string    `db:"display_name"`
	CreatedAt   time.Time `db:"created_at"`
}

// GetUser reads a user.
func GetUser(ctx context.Context, q db.DBTX, id string) (User, error) {
	rows, err := q.Query(ctx, `SELECT id, email, display_name, created_at FROM users WHERE id = $1`, id)
	if err != nil {
		return User{}, err
	}
	u, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[User])
	return u, db.Translate(err)
}

// Owner is a member with the owner role.
type Owner struct {
	UserID      string    `db:"user_id"`
	Email       string    `db:"email"`
	DisplayName string    `db:"display_name"`
	Since       time.Time `db:"since"`
}

// ListOwners pages through an organization's owners in the order they joined.
func ListOwners(ctx context.Context, q db.DBTX, orgID, after string, limit int) ([]Owner, error) {
	rows, err := q.Query(ctx, `SELECT u.id AS user_id, u.email, u.display_name, m.created_at AS since
		FROM memberships m JOIN users u ON u.id = m.user_id
		WHERE m.organization_id = $1 AND m.role = 'owner' AND ($2 = '' OR u.id > $2)
		ORDER BY u.id LIMIT $3`, orgID, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Owner])
}

// LooksLikeUserKey is a cheap syntax check before any database work.
func LooksLikeUserKey(s string) bool {
	rest, ok := strings.CutPrefix(s, UserKeyPrefix)
	if !ok || len(rest) != 52 {
		return false
	}
	_, err := secretEncoding.DecodeString(rest)
	return err == nil
}

// KeyHolder is who a personal API key authenticates: a member of one organization.
type KeyHolder struct {
	KeyID        string
	User         User
	Organization Organization
	Role         string
	KeyHash      []byte
}

// KeyHolderByHash authenticates a personal API key by its hash, in one query.
func KeyHolderByHash(ctx context.Context, q db.DBTX, hash []byte) (KeyHolder, error) {
	var h KeyHolder
	o := &h.Organization
	err := q.QueryRow(ctx, `SELECT k.id, k.key_hash, m.role, u.id, u.email, u.display_name, u.created_at,
			o.id, o.slug, o.display_name, o.state, o.suspended_reason, o.purge_after, o.version, o.created_at, o.updated_at
		FROM user_api_keys k
		JOIN memberships m ON m.organization_id = k.organization_id AND m.user_id = k.user_id
		JOIN users u ON u.id = k.user_id
		JOIN organizations o ON o.id = k.organization_id
		WHERE k.key_hash = $1 AND k.revoked_at IS NULL`, hash).Scan(&h.KeyID, &h.KeyHash, &h.Role,
		&h.User.ID, &h.User.Email, &h.User.DisplayName, &h.User.CreatedAt,
		&o.ID, &o.Slug, &o.DisplayName, &o.State, &o.SuspendedReason, &o.PurgeAfter, &o.Version, &o.CreatedAt, &o.UpdatedAt)
	return h, db.Translate(err)
}
