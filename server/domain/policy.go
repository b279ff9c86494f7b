package domain

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain/policyfield"
)

// Policy is a stored policy document with its version.
type Policy struct {
	OrganizationID string
	Document       PolicyDocument
	Version        int64
}

// GetPolicy reads an organization's policy document.
func GetPolicy(ctx context.Context, q db.DBTX, orgID string) (Policy, error) {
	return scanPolicy(orgID, q.QueryRow(ctx, getPolicy, orgID))
}

const getPolicy = `SELECT document, version FROM organization_policies WHERE organization_id = $1`

// QueueGetPolicy queues GetPolicy on b; the returned function reads its result.
func QueueGetPolicy(b *pgx.Batch, orgID string) func(pgx.BatchResults) (Policy, error) {
	b.Queue(getPolicy, orgID)
	return func(br pgx.BatchResults) (Policy, error) { return scanPolicy(orgID, br.QueryRow()) }
}

func scanPolicy(orgID string, row pgx.Row) (Policy, error) {
	p := Policy{OrganizationID: orgID}
	var raw []byte
	if err := row.Scan(&raw, &p.Version); err != nil {
		return p, db.Translate(err)
	}
	return p, json.Unmarshal(raw, &p.Document)
}

// PutPolicy replaces the policy document if the stored version is expected, and returns the
// policy stored, the organization it locked (for the caller's audit) and the fields that
// changed. When the change withdraws the organization_identity_providers entitlement, the
// reduction runs in the same transaction, before the caller's response.
func PutPolicy(ctx context.Context, q db.DBTX, orgID string, expected int64, doc PolicyDocument, defaults PolicyDocument) (Policy, Organization, []string, error) {
	o, err := lockOrganization(ctx, q, orgID)
	if err != nil {
		return Policy{}, o, nil, err
	}
	if err := doc.Validate(); err != nil {
		return Policy{}, o, nil, err
	}
	if o.State == StatePurging {
		return Policy{}, o, nil, ErrPurgeStarted
	}
	old, err := lockPolicy(ctx, q, orgID)
	if err != nil {
		return Policy{}, o, nil, err
	}
	if old.Version != expected {
		return Policy{}, o, nil, &VersionMismatchError{Current: old.Version}
	}
	doc = doc.normalized()
	raw, err := json.Marshal(doc)
	if err != nil {
		return Policy{}, o, nil, err
	}
	p := Policy{OrganizationID: orgID, Document: doc}
	if err := q.QueryRow(ctx, `UPDATE organization_policies SET document = $2, version = version + 1, updated_at = now()
		WHERE organization_id = $1 RETURNING version`, orgID, raw).Scan(&p.Version); err != nil {
		return Policy{}, o, nil, err
	}
	if Entitled(old.Document, defaults, policyfield.OrganizationIdentityProviders) &&
		!Entitled(doc, defaults, policyfield.OrganizationIdentityProviders) {
		if _, err := WithdrawOrganizationProviders(ctx, q, orgID); err != nil {
			return Policy{}, o, nil, err
		}
	}
	return p, o, changedPolicyFields(old.Document, doc), nil
}

func lockPolicy(ctx context.Context, q db.DBTX, orgID string) (Policy, error) {
	p := Policy{OrganizationID: orgID}
	var raw []byte
	err := q.QueryRow(ctx, `SELECT document, version FROM organization_policies WHERE organization_id = $1 FOR UPDATE`, orgID).Scan(&raw, &p.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, db.ErrNotFound
	}
	if err != nil {
		return p, err
	}
	return p, json.Unmarshal(raw, &p.Document)
}
