package domain

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"renga.dev/renga/server/db"
)

// IntakeKeyPrefix starts every intake key: renga_intake_[<deployment identifier>_]<secret>.
const IntakeKeyPrefix = "renga_intake_"

// IntakeKey is an organization's key for registering installations (never its secret).
type IntakeKey struct {
	ID             string     `db:"id"`
	OrganizationID string     `db:"organization_id"`
	Name           string     `db:"name"`
	Identifier     *string    `db:"identifier"`
	CreatedAt      time.Time  `db:"created_at"`
	RevokedAt      *time.Time `db:"revoked_at"`
}

const intakeKeyColumns = `id, organization_id, name, identifier, created_at, revoked_at`

// LooksLikeIntakeKey is a cheap syntax check before any database work. The identifier part is
// only checked for shape: authentication never trusts it.
func LooksLikeIntakeKey(s string) bool {
	rest, ok := strings.CutPrefix(s, IntakeKeyPrefix)
	if !ok {
		return false
	}
	if i := strings.LastIndexByte(rest, '_'); i >= 0 {
		id := rest[:i]
		if len(id) < 1 || len(id) > 16 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
		rest = rest[i+1:]
	}
	if len(rest) != 52 {
		return false
	}
	_, err := secretEncoding.DecodeString(rest)
	return err == nil
}

// HashIntakeKey is the stored form of an intake key: the SHA-256 of the key without its
// deployment identifier (renga_intake_<secret>). The identifier is an annotation for resolvers,
// never part of authentication: a key with a wrong or missing identifier and the right secret
// hashes the same, and a wrong secret never does.
func HashIntakeKey(key string) []byte {
	rest := strings.TrimPrefix(key, IntakeKeyPrefix)
	if i := strings.LastIndexByte(rest, '_'); i >= 0 {
		rest = rest[i+1:]
	}
	return HashSecret(IntakeKeyPrefix + rest)
}

// NewIntakeKeySecret returns a new key carrying identifier ("" for none).
func NewIntakeKeySecret(identifier string) string {
	if identifier == "" {
		return IntakeKeyPrefix + NewSecret()
	}
	return IntakeKeyPrefix + identifier + "_" + NewSecret()
}

// CreateIntakeKey creates a key for the organization, carrying the deployment identifier.
func CreateIntakeKey(ctx context.Context, q db.DBTX, orgID, name, identifier string) (IntakeKey, string, error) {
	secret := NewIntakeKeySecret(identifier)
	var ident *string
	if identifier != "" {
		ident = &identifier
	}
	rows, err := q.Query(ctx, `INSERT INTO intake_keys (id, organization_id, name, identifier, key_hash)
		VALUES ($1, $2, $3, $4, $5) RETURNING `+intakeKeyColumns, db.NewID("key"), orgID, name, ident, HashIntakeKey(secret))
	if err != nil {
		return IntakeKey{}, "", err
	}
	k, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[IntakeKey])
	return k, secret, err
}

// ListIntakeKeys pages through an organization's keys, newest first.
func ListIntakeKeys(ctx context.Context, q db.DBTX, orgID, before string, limit int) ([]IntakeKey, error) {
	rows, err := q.Query(ctx, `SELECT `+intakeKeyColumns+` FROM intake_keys WHERE organization_id = $1 AND ($2 = '' OR id < $2)
		ORDER BY id DESC LIMIT $3`, orgID, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[IntakeKey])
}

// RevokeIntakeKey revokes a key; revoking a revoked key changes nothing.
func RevokeIntakeKey(ctx context.Context, q db.DBTX, orgID, id string) (IntakeKey, []string, error) {
	rows, err := q.Query(ctx, `WITH old AS (SELECT revoked_at FROM intake_keys WHERE organization_id = $1 AND id = $2 FOR UPDATE)
		UPDATE intake_keys k SET revoked_at = coalesce(k.revoked_at, now()) FROM old
		WHERE k.organization_id = $1 AND k.id = $2
		RETURNING k.id, k.organization_id, k.name, k.identifier, k.created_at, k.revoked_at, old.revoked_at IS NULL AS changed`, orgID, id)
	if err != nil {
		return IntakeKey{}, nil, err
	}
	type revoked struct {
		IntakeKey
		Changed bool `db:"changed"`
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[revoked])
	if err != nil {
		return IntakeKey{}, nil, db.Translate(err)
	}
	if !r.Changed {
		return r.IntakeKey, nil, nil
	}
	return r.IntakeKey, []string{"intake_keys"}, nil
}

// RotateIntakeKey revokes a live key and creates its successor with the same name, carrying
// the deployment's current identifier.
func RotateIntakeKey(ctx context.Context, q db.DBTX, orgID, id, identifier string) (IntakeKey, string, error) {
	var name string
	err := q.QueryRow(ctx, `UPDATE intake_keys SET revoked_at = now() WHERE organization_id = $1 AND id = $2 AND revoked_at IS NULL
		RETURNING name`, orgID, id).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		var exists bool
		if err := q.QueryRow(ctx, `SELECT true FROM intake_keys WHERE organization_id = $1 AND id = $2`, orgID, id).Scan(&exists); err != nil {
			return IntakeKey{}, "", db.Translate(err)
		}
		return IntakeKey{}, "", ErrInvalidState
	}
	if err != nil {
		return IntakeKey{}, "", err
	}
	return CreateIntakeKey(ctx, q, orgID, name, identifier)
}

// AgentOrg is the organization an agent credential belongs to, as authentication sees it.
type AgentOrg struct {
	ID    string
	Name  string
	State string
}

// IntakeKeyHolder finds an intake key by its stored hash (HashIntakeKey).
func IntakeKeyHolder(ctx context.Context, q db.DBTX, hash []byte) (keyID string, storedHash []byte, org AgentOrg, err error) {
	err = q.QueryRow(ctx, `SELECT k.id, k.key_hash, o.id, o.display_name, o.state FROM intake_keys k
		JOIN organizations o ON o.id = k.organization_id WHERE k.key_hash = $1 AND k.revoked_at IS NULL`, hash).
		Scan(&keyID, &storedHash, &org.ID, &org.Name, &org.State)
	return keyID, storedHash, org, db.Translate(err)
}
