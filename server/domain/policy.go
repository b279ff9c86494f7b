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

// GetPolicy reads an organization's policy document. An organization whose policy was never
// written has no row: its document is empty, at version 1 (what the row would hold).
func GetPolicy(ctx context.Context, q db.DBTX, orgID string) (Policy, error) {
	return scanPolicy(orgID, q.QueryRow(ctx, getPolicy, orgID))
}

var getPolicy = readDocumentSQL("organization_policies")

// readDocumentSQL reads an organization's policy or settings document (table is
// organization_policies or organization_settings, whose rows are alike): its row's document
// and version, or, for a document never written (no row), the defaults ('{}') at version 1;
// no row when the organization is not there.
func readDocumentSQL(table string) string {
	return `SELECT coalesce(d.document, '{}'), coalesce(d.version, 1)
		FROM organizations o LEFT JOIN ` + table + ` d ON d.organization_id = o.id WHERE o.id = $1`
}

// lockDocument reads a policy or settings document for a change, holding its row; found is
// false when it has none (never written).
func lockDocument(ctx context.Context, q db.DBTX, table, orgID string) (raw []byte, version int64, found bool, err error) {
	err = q.QueryRow(ctx, `SELECT document, version FROM `+table+` WHERE organization_id = $1 FOR UPDATE`, orgID).Scan(&raw, &version)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, false, nil
	}
	return raw, version, err == nil, err
}

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
	if p.Version, err = writeDocument(ctx, q, "organization_policies", orgID, old.Version, raw); err != nil {
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

// lockPolicy reads the policy for a change, holding its row if it has one. Its callers hold the
// organization's row (lockOrganization), so a policy without a row gets its first one from
// one writer at a time.
func lockPolicy(ctx context.Context, q db.DBTX, orgID string) (Policy, error) {
	p := Policy{OrganizationID: orgID}
	raw, version, found, err := lockDocument(ctx, q, "organization_policies", orgID)
	if err != nil {
		return p, err
	}
	if !found {
		raw, version = []byte("{}"), 1
	}
	p.Version = version
	return p, json.Unmarshal(raw, &p.Document)
}

// writeDocument stores an organization's policy or settings document (table is
// organization_policies or organization_settings, whose rows are alike) one version on from
// read, the version the caller read: a row's first write stores version 2 (an organization's
// documents are at version 1, the defaults, until their first write, which makes their row).
// It returns the version stored; a version other than read stored meanwhile (a first row
// another transaction made) is a VersionMismatchError, and nothing is written.
func writeDocument(ctx context.Context, q db.DBTX, table, orgID string, read int64, raw []byte) (int64, error) {
	var version int64
	err := q.QueryRow(ctx, `WITH updated AS (
			UPDATE `+table+` SET document = $2, version = version + 1, updated_at = now()
			WHERE organization_id = $1 AND version = $3 RETURNING version),
		inserted AS (
			INSERT INTO `+table+` (organization_id, document, version) SELECT $1, $2, 2
			WHERE $3 = 1 AND NOT EXISTS (SELECT 1 FROM updated) ON CONFLICT (organization_id) DO NOTHING RETURNING version)
		SELECT version FROM updated UNION ALL SELECT version FROM inserted`, orgID, raw, read).Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		var current int64
		if err := q.QueryRow(ctx, `SELECT version FROM `+table+` WHERE organization_id = $1`, orgID).Scan(&current); err != nil {
			return 0, db.Translate(err)
		}
		return 0, &VersionMismatchError{Current: current}
	}
	return version, err
}
