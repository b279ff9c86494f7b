package domain

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain/policyfield"
)

// Installation is an agent's registered identity.
type Installation struct {
	ID             string     `db:"id"`
	OrganizationID string     `db:"organization_id"`
	PublicKey      []byte     `db:"public_key"`
	Hostname       string     `db:"hostname"`
	OS             string     `db:"os"`
	RegisteredAt   time.Time  `db:"registered_at"`
	LastSeenAt     *time.Time `db:"last_seen_at"`
}

const installationColumns = `id, organization_id, public_key, hostname, os, registered_at, last_seen_at`

// RegisterInstallation registers an installation, idempotently on its ID: the same ID and key
// return the existing installation (created false). It enforces max_agents, serialized on the
// organization's row so that concurrent registrations cannot exceed it together.
func RegisterInstallation(ctx context.Context, q db.DBTX, orgID, intakeKeyID string, in Installation, defaults PolicyDocument) (Installation, bool, error) {
	existing, err := getInstallation(ctx, q, in.ID)
	switch {
	case err == nil:
		if existing.OrganizationID != orgID || !ed25519.PublicKey(existing.PublicKey).Equal(ed25519.PublicKey(in.PublicKey)) {
			return Installation{}, false, ErrInstallationConflict
		}
		return existing, false, nil
	case !errors.Is(err, db.ErrNotFound):
		return Installation{}, false, err
	}
	o, err := lockOrganization(ctx, q, orgID)
	if err != nil {
		return Installation{}, false, err
	}
	policy, err := GetPolicy(ctx, q, o.ID)
	if err != nil {
		return Installation{}, false, err
	}
	max := Limit(policy.Document, defaults, policyfield.MaxAgents)
	var count int64
	if err := q.QueryRow(ctx, `SELECT count(*) FROM installations WHERE organization_id = $1`, o.ID).Scan(&count); err != nil {
		return Installation{}, false, err
	}
	if count >= max {
		return Installation{}, false, &LimitError{Limit: policyfield.MaxAgents.Name(), Value: max}
	}
	rows, err := q.Query(ctx, `INSERT INTO installations (id, organization_id, public_key, hostname, os, intake_key_id)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING RETURNING `+installationColumns,
		in.ID, o.ID, in.PublicKey, in.Hostname, in.OS, intakeKeyID)
	if err != nil {
		return Installation{}, false, err
	}
	inst, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Installation])
	if errors.Is(err, pgx.ErrNoRows) {
		// Registered concurrently: answer as a retry would.
		if existing, err := getInstallation(ctx, q, in.ID); err == nil && existing.OrganizationID == orgID &&
			ed25519.PublicKey(existing.PublicKey).Equal(ed25519.PublicKey(in.PublicKey)) {
			return existing, false, nil
		}
		return Installation{}, false, ErrInstallationConflict
	}
	return inst, err == nil, err
}

func getInstallation(ctx context.Context, q db.DBTX, id string) (Installation, error) {
	rows, err := q.Query(ctx, `SELECT `+installationColumns+` FROM installations WHERE id = $1`, id)
	if err != nil {
		return Installation{}, err
	}
	inst, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Installation])
	return inst, db.Translate(err)
}

// ListInstallations pages through an organization's installations in ID order.
func ListInstallations(ctx context.Context, q db.DBTX, orgID, after string, limit int) ([]Installation, error) {
	rows, err := q.Query(ctx, `SELECT `+installationColumns+` FROM installations WHERE organization_id = $1 AND id > $2
		ORDER BY id LIMIT $3`, orgID, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Installation])
}

// InstallationHolder is what signature authentication needs, with the organization's policy,
// so that intake needs no further read of it.
type InstallationHolder struct {
	Installation Installation
	Org          AgentOrg
	Policy       PolicyDocument
	// PolicyVersion is Policy's version (1 while the policy was never written: no row, the empty
	// document).
	PolicyVersion int64
}

// InstallationForAuth reads an installation, its organization and its policy, in one query.
func InstallationForAuth(ctx context.Context, q db.DBTX, id string) (InstallationHolder, error) {
	var h InstallationHolder
	var policy []byte
	i := &h.Installation
	err := q.QueryRow(ctx, `SELECT i.id, i.organization_id, i.public_key, i.hostname, i.os, i.registered_at, i.last_seen_at,
			o.display_name, o.state, coalesce(p.document, '{}'), coalesce(p.version, 1)
		FROM installations i JOIN organizations o ON o.id = i.organization_id
		LEFT JOIN organization_policies p ON p.organization_id = i.organization_id
		WHERE i.id = $1`, id).Scan(&i.ID, &i.OrganizationID, &i.PublicKey, &i.Hostname, &i.OS, &i.RegisteredAt, &i.LastSeenAt,
		&h.Org.Name, &h.Org.State, &policy, &h.PolicyVersion)
	if err != nil {
		return h, db.Translate(err)
	}
	h.Org.ID = i.OrganizationID
	return h, json.Unmarshal(policy, &h.Policy)
}

// SignatureSkew is how far a signed request's timestamp may be from the server's clock.
const SignatureSkew = 5 * time.Minute

// StringToSign is what an installation signs (see the installationSignature security scheme in
// openapi.yaml): six lines joined by "\n".
func StringToSign(method, requestTarget, timestamp, installationID string, body []byte) string {
	digest := sha256.Sum256(body)
	return strings.Join([]string{"renga-request-v1", method, requestTarget, timestamp, installationID, hex.EncodeToString(digest[:])}, "\n")
}
