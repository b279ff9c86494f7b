package domain

import (
	"context"
	"net/mail"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain/policyfield"
)

// Credential prefixes.
const (
	InvitationPrefix = "renga_invite_"
	UserKeyPrefix    = "renga_user_"
)

// InvitationTTL is how long an invitation can be accepted.
const InvitationTTL = 7 * 24 * time.Hour

// Invitation is an owner invitation (never its secret).
type Invitation struct {
	ID             string     `db:"id"`
	OrganizationID string     `db:"organization_id"`
	Email          string     `db:"email"`
	State          string     `db:"state"`
	CreatedAt      time.Time  `db:"created_at"`
	ExpiresAt      time.Time  `db:"expires_at"`
	AcceptedAt     *time.Time `db:"accepted_at"`
	RevokedAt      *time.Time `db:"revoked_at"`
}

// Invitation states; expired is derived from a pending invitation's deadline.
const (
	InvitationPending  = "pending"
	InvitationAccepted = "accepted"
	InvitationRevoked  = "revoked"
	InvitationExpired  = "expired"
)

const invitationColumns = `id, organization_id, email,
	CASE WHEN state = 'pending' AND expires_at <= now() THEN 'expired' ELSE state END AS state,
	created_at, expires_at, accepted_at, revoked_at`

// CheckEmail refuses an address the API could not write back as it is: one definition of an
// email on the way in and on the way out (the API's email type reads and writes addresses with
// net/mail; a quoted local part reads into a form that no longer parses).
func CheckEmail(email string) error {
	if a, err := mail.ParseAddress(email); err != nil || a.Address != email || a.Name != "" {
		return &ValidationError{Field: "email", Message: "must be a plain address such as name@example.com (no quoted local part, no display name)"}
	}
	return nil
}

// NormalizeEmail is the stored form of an address: trimmed and lowercased.
func NormalizeEmail(s string) string { return strings.ToLower(strings.TrimSpace(s)) }

// CreateInvitation creates a pending invitation and returns its secret, which only the mail
// carries. A pending invitation for the same address is revoked: the new one replaces it.
func CreateInvitation(ctx context.Context, q db.DBTX, orgID, email string) (Invitation, string, error) {
	o, err := lockOrganization(ctx, q, orgID)
	if err != nil {
		return Invitation{}, "", err
	}
	if o.State != StateActive && o.State != StateSuspended {
		return Invitation{}, "", ErrInvalidState
	}
	email = NormalizeEmail(email)
	if err := CheckEmail(email); err != nil {
		return Invitation{}, "", err
	}
	if _, err := q.Exec(ctx, `UPDATE invitations SET state = 'revoked', revoked_at = now()
		WHERE organization_id = $1 AND email = $2 AND state = 'pending'`, orgID, email); err != nil {
		return Invitation{}, "", err
	}
	secret := InvitationPrefix + NewSecret()
	rows, err := q.Query(ctx, `INSERT INTO invitations (id, organization_id, email, token_hash, expires_at)
		VALUES ($1, $2, $3, $4, now() + $5::interval) RETURNING `+invitationColumns,
		db.NewID("inv"), orgID, email, HashSecret(secret), InvitationTTL)
	if err != nil {
		return Invitation{}, "", err
	}
	inv, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Invitation])
	return inv, secret, err
}

// GetInvitation reads one invitation of an organization.
func GetInvitation(ctx context.Context, q db.DBTX, orgID, id string) (Invitation, error) {
	rows, err := q.Query(ctx, `SELECT `+invitationColumns+` FROM invitations WHERE organization_id = $1 AND id = $2`, orgID, id)
	if err != nil {
		return Invitation{}, err
	}
	inv, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Invitation])
	return inv, db.Translate(err)
}

// ListInvitations pages through an organization's invitations, newest first.
func ListInvitations(ctx context.Context, q db.DBTX, orgID, state, before string, limit int) ([]Invitation, error) {
	rows, err := q.Query(ctx, `SELECT * FROM (SELECT `+invitationColumns+` FROM invitations
		WHERE organization_id = $1 AND ($3 = '' OR id < $3)) i WHERE ($2 = '' OR state = $2) ORDER BY id DESC LIMIT $4`,
		orgID, state, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Invitation])
}

// RevokeInvitation revokes a pending invitation; any other state is left as it is.
func RevokeInvitation(ctx context.Context, q db.DBTX, orgID, id string) (Invitation, []string, error) {
	if _, err := lockOrganization(ctx, q, orgID); err != nil {
		return Invitation{}, nil, err
	}
	tag, err := q.Exec(ctx, `UPDATE invitations SET state = 'revoked', revoked_at = now()
		WHERE organization_id = $1 AND id = $2 AND state = 'pending' AND expires_at > now()`, orgID, id)
	if err != nil {
		return Invitation{}, nil, err
	}
	inv, err := GetInvitation(ctx, q, orgID, id)
	if err != nil || tag.RowsAffected() == 0 {
		return inv, nil, err
	}
	return inv, []string{"state"}, nil
}

// Accepted is what accepting an invitation produces.
type Accepted struct {
	User         User
	Organization Organization
	APIKeyID     string
	APIKey       string // shown once
	Joined       bool   // false when the user already was an owner
}

// AcceptInvitation redeems an invitation secret: it creates the user (or links the existing
// one by email), adds the owner membership within max_users, marks the invitation accepted and
// mints a personal API key. The invitation and organization rows are locked, so concurrent
// acceptances neither redeem one invitation twice nor exceed max_users together.
func AcceptInvitation(ctx context.Context, q db.DBTX, secret, displayName string, defaults PolicyDocument) (Accepted, error) {
	var a Accepted
	hash := HashSecret(secret)
	// Lock order: the organization, then the invitation (as every writer does).
	var orgID string
	if err := q.QueryRow(ctx, `SELECT organization_id FROM invitations WHERE token_hash = $1`, hash).Scan(&orgID); err != nil {
		return a, db.Translate(err)
	}
	o, err := lockOrganization(ctx, q, orgID)
	if err != nil {
		return a, err
	}
	rows, err := q.Query(ctx, `SELECT `+invitationColumns+` FROM invitations WHERE token_hash = $1 FOR UPDATE`, hash)
	if err != nil {
		return a, err
	}
	inv, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Invitation])
	if err != nil {
		return a, db.Translate(err)
	}
	switch inv.State {
	case InvitationExpired:
		return a, ErrInvitationExpired
	case InvitationRevoked:
		return a, ErrInvitationRevoked
	case InvitationAccepted:
		return a, ErrInvitationAccepted
	}
	switch o.State {
	case StateActive:
	case StateMoved:
		return a, ErrMoved
	default:
		return a, ErrSuspended
	}
	a.Organization = o
	rows, err = q.Query(ctx, `INSERT INTO users (id, email, display_name) VALUES ($1, $2, $3)
		ON CONFLICT (email) DO UPDATE SET email = excluded.email RETURNING id, email, display_name, created_at`,
		db.NewID("usr"), inv.Email, displayName)
	if err != nil {
		return a, err
	}
	if a.User, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[User]); err != nil {
		return a, err
	}
	var member bool
	var members int64
	if err := q.QueryRow(ctx, `SELECT count(*) FILTER (WHERE user_id = $2) > 0, count(*) FROM memberships WHERE organization_id = $1`,
		o.ID, a.User.ID).Scan(&member, &members); err != nil {
		return a, err
	}
	if !member {
		policy, err := GetPolicy(ctx, q, o.ID)
		if err != nil {
			return a, err
		}
		max := Limit(policy.Document, defaults, policyfield.MaxUsers)
		if members >= max {
			return a, &LimitError{Limit: policyfield.MaxUsers.Name(), Value: max}
		}
		if _, err := q.Exec(ctx, `INSERT INTO memberships (organization_id, user_id, role) VALUES ($1, $2, 'owner')`, o.ID, a.User.ID); err != nil {
			return a, err
		}
		a.Joined = true
	}
	// A membership an import brought (pending, granting nothing) is now this one.
	if _, err := q.Exec(ctx, `DELETE FROM pending_memberships WHERE organization_id = $1 AND user_id = $2`, o.ID, a.User.ID); err != nil {
		return a, err
	}
	if _, err := q.Exec(ctx, `UPDATE invitations SET state = 'accepted', accepted_at = now(), accepted_by = $2 WHERE id = $1`,
		inv.ID, a.User.ID); err != nil {
		return a, err
	}
	a.APIKey = UserKeyPrefix + NewSecret()
	a.APIKeyID = db.NewID("key")
	_, err = q.Exec(ctx, `INSERT INTO user_api_keys (id, organization_id, user_id, key_hash) VALUES ($1, $2, $3, $4)`,
		a.APIKeyID, o.ID, a.User.ID, HashSecret(a.APIKey))
	return a, err
}
