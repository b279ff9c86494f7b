package domain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain/policyfield"
	"renga.dev/renga/server/secretbox"
)

// OrganizationProvider is an identity provider of an organization's own (DESIGN §5), as the
// owners' API shows it: never with its client secret.
type OrganizationProvider struct {
	ID                  string     `db:"id"`
	OrganizationID      string     `db:"organization_id"`
	Slug                string     `db:"slug"`
	Protocol            string     `db:"protocol"`
	Issuer              string     `db:"issuer"`
	DisplayName         string     `db:"display_name"`
	ClientID            string     `db:"client_id"`
	Scopes              []string   `db:"scopes"`
	AllowedEmailDomains []string   `db:"allowed_email_domains"`
	HasClientSecret     bool       `db:"has_client_secret"`
	State               string     `db:"state"`
	DisabledReason      *string    `db:"disabled_reason"`
	DisabledAt          *time.Time `db:"disabled_at"`
	CreatedAt           time.Time  `db:"created_at"`
	UpdatedAt           time.Time  `db:"updated_at"`
}

// Why an organization provider is disabled.
const (
	DisabledByOwner       = "owner"
	DisabledByEntitlement = "entitlement_withdrawn"
	DisabledByImport      = "imported" // it came in a transfer archive, without its secret
)

const orgProviderColumns = `id, organization_id, slug, protocol, issuer, display_name, client_id, scopes,
	allowed_email_domains, client_secret IS NOT NULL AS has_client_secret, state, disabled_reason, disabled_at,
	created_at, updated_at`

// orgProviderColumnsOf is orgProviderColumns of the table aliased p.
const orgProviderColumnsOf = `p.id, p.organization_id, p.slug, p.protocol, p.issuer, p.display_name, p.client_id, p.scopes,
	p.allowed_email_domains, p.client_secret IS NOT NULL AS has_client_secret, p.state, p.disabled_reason, p.disabled_at,
	p.created_at, p.updated_at`

func orgProviderAAD(id string) string { return "organization_identity_provider:" + id }

// CreateOrganizationProvider stores an enabled provider of the organization's own, if its
// policy grants organization_identity_providers. It holds the organization's row (as a policy
// change does) so that a withdrawal of the entitlement and a creation never cross: the
// creation sees the withdrawal, or the withdrawal disables what was created.
func CreateOrganizationProvider(ctx context.Context, q db.DBTX, box *secretbox.Box, orgID string, in NewProvider, defaults PolicyDocument) (OrganizationProvider, error) {
	if err := CheckIssuer(in.Issuer); err != nil {
		return OrganizationProvider{}, err
	}
	cfg, err := in.normalized()
	if err != nil {
		return OrganizationProvider{}, err
	}
	if _, err := lockOrganization(ctx, q, orgID); err != nil {
		return OrganizationProvider{}, err
	}
	policy, err := lockPolicy(ctx, q, orgID)
	if err != nil {
		return OrganizationProvider{}, err
	}
	if !Entitled(policy.Document, defaults, policyfield.OrganizationIdentityProviders) {
		return OrganizationProvider{}, &NotEntitledError{Entitlement: policyfield.OrganizationIdentityProviders.Name()}
	}
	id := db.NewID("oip")
	var sealed []byte
	if in.ClientSecret != nil {
		if box == nil {
			return OrganizationProvider{}, ErrNoSecretKey
		}
		sealed = box.Seal([]byte(*in.ClientSecret), orgProviderAAD(id))
	}
	rows, err := q.Query(ctx, `INSERT INTO organization_identity_providers (id, organization_id, slug, protocol, issuer,
			display_name, client_id, client_secret, scopes, allowed_email_domains)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
		ON CONFLICT (organization_id, slug) WHERE state = 'enabled' DO NOTHING
		RETURNING `+orgProviderColumns,
		id, orgID, in.Slug, in.Protocol, in.Issuer, cfg.DisplayName, cfg.ClientID, sealed, cfg.Scopes, cfg.AllowedEmailDomains)
	if err != nil {
		return OrganizationProvider{}, err
	}
	p, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[OrganizationProvider])
	if errors.Is(err, pgx.ErrNoRows) {
		return OrganizationProvider{}, ErrSlugTaken
	}
	return p, db.Translate(err)
}

// ListOrganizationProviders returns up to limit of an organization's providers after after,
// oldest first.
func ListOrganizationProviders(ctx context.Context, q db.DBTX, orgID, after string, limit int) ([]OrganizationProvider, error) {
	rows, err := q.Query(ctx, `SELECT `+orgProviderColumns+` FROM organization_identity_providers
		WHERE organization_id = $1 AND id > $2 ORDER BY id LIMIT $3`, orgID, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[OrganizationProvider])
}

// DisableOrganizationProvider disables one of the organization's providers (target-state
// idempotent) and reports whether it changed.
func DisableOrganizationProvider(ctx context.Context, q db.DBTX, orgID, id string) (OrganizationProvider, bool, error) {
	rows, err := q.Query(ctx, `WITH old AS (
			SELECT state FROM organization_identity_providers WHERE organization_id = $1 AND id = $2 FOR UPDATE)
		UPDATE organization_identity_providers p SET state = 'disabled',
			disabled_reason = coalesce(p.disabled_reason, $3), disabled_at = coalesce(p.disabled_at, now()),
			updated_at = CASE WHEN old.state = 'enabled' THEN now() ELSE p.updated_at END
		FROM old WHERE p.organization_id = $1 AND p.id = $2
		RETURNING `+orgProviderColumnsOf+`, old.state = 'enabled' AS changed`, orgID, id, DisabledByOwner)
	if err != nil {
		return OrganizationProvider{}, false, err
	}
	type disabled struct {
		OrganizationProvider
		Changed bool `db:"changed"`
	}
	d, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[disabled])
	return d.OrganizationProvider, d.Changed, db.Translate(err)
}

// WithdrawOrganizationProviders is the reduction that withdrawing the
// organization_identity_providers entitlement requires, in the policy change's transaction:
// every enabled provider of the organization is disabled (RFD 15 disable), with the reason
// entitlement_withdrawn. (RFD 16's removal of memberships and grants bound to those providers
// has nothing to remove here: memberships come from invitations, and support grants are bound
// to the deployment's support source, never to an organization's provider.) It returns how many
// it disabled.
func WithdrawOrganizationProviders(ctx context.Context, q db.DBTX, orgID string) (int64, error) {
	tag, err := q.Exec(ctx, `UPDATE organization_identity_providers SET state = 'disabled', disabled_reason = $2,
			disabled_at = now(), updated_at = now()
		WHERE organization_id = $1 AND state = 'enabled'`, orgID, DisabledByEntitlement)
	return tag.RowsAffected(), err
}

// resealOrganizationProviderSecrets is ResealProviderSecrets for organizations' providers.
func resealOrganizationProviderSecrets(ctx context.Context, q db.DBTX, box *secretbox.Box) (int, error) {
	type sealedRow struct {
		id     string
		sealed []byte
	}
	rows, err := q.Query(ctx, `SELECT id, client_secret FROM organization_identity_providers
		WHERE client_secret IS NOT NULL ORDER BY id FOR UPDATE`)
	if err != nil {
		return 0, err
	}
	var stale []sealedRow
	for rows.Next() {
		var r sealedRow
		if err := rows.Scan(&r.id, &r.sealed); err != nil {
			rows.Close()
			return 0, err
		}
		if !box.Current(r.sealed) {
			stale = append(stale, r)
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, r := range stale {
		plain, err := box.Open(r.sealed, orgProviderAAD(r.id))
		if err != nil {
			return 0, fmt.Errorf("organization provider %s: %w", r.id, err)
		}
		if _, err := q.Exec(ctx, `UPDATE organization_identity_providers SET client_secret = $2 WHERE id = $1`,
			r.id, box.Seal(plain, orgProviderAAD(r.id))); err != nil {
			return 0, err
		}
	}
	return len(stale), nil
}

// OrganizationProviderClientSecret opens an organization provider's stored client secret ("" when
// it has none).
func OrganizationProviderClientSecret(ctx context.Context, q db.DBTX, box *secretbox.Box, id string) (string, error) {
	var sealed []byte
	if err := q.QueryRow(ctx, `SELECT client_secret FROM organization_identity_providers WHERE id = $1`, id).Scan(&sealed); err != nil {
		return "", db.Translate(err)
	}
	if sealed == nil {
		return "", nil
	}
	if box == nil {
		return "", ErrNoSecretKey
	}
	plain, err := box.Open(sealed, orgProviderAAD(id))
	return string(plain), err
}

// importedProvider checks an organization provider of a transfer archive as a creation would
// (slug, protocol, issuer, configuration) and says why it is disabled here. Every imported
// provider is disabled: its client secret did not travel, and the issuer knows only the source's
// redirect URI, so it could not sign anyone in; the owners add it again (a provider is never
// re-enabled). One enabled at the source is disabled with the reason imported; one disabled
// there keeps its reason and time.
func importedProvider(r providerRow) (NewProvider, string, error) {
	in := NewProvider{Slug: r.Slug, Protocol: r.Protocol, Issuer: r.Issuer, ProviderConfig: ProviderConfig{
		DisplayName: r.DisplayName, ClientID: r.ClientID, Scopes: r.Scopes, AllowedEmailDomains: r.AllowedEmailDomains}}
	switch {
	case !providerSlugPattern.MatchString(r.Slug):
		return in, "", errors.New("slug: not a provider slug")
	case r.Protocol != "oidc":
		return in, "", fmt.Errorf("protocol %q", r.Protocol)
	case len(r.Issuer) > 2048:
		return in, "", errors.New("issuer: longer than 2048 characters")
	case len(r.Scopes) == 0 || len(r.Scopes) > 20 || len(r.AllowedEmailDomains) > 100:
		return in, "", errors.New("1 to 20 scopes and at most 100 email domains")
	case r.CreatedAt.IsZero():
		return in, "", errors.New("no created_at")
	}
	if err := CheckIssuer(r.Issuer); err != nil {
		return in, "", err
	}
	cfg, err := in.normalized()
	if err != nil {
		return in, "", err
	}
	in.ProviderConfig = cfg
	switch {
	case r.State == ProviderEnabled && r.DisabledReason == nil && r.DisabledAt == nil:
		return in, DisabledByImport, nil
	case r.State == ProviderDisabled && r.DisabledReason != nil && r.DisabledAt != nil &&
		slices.Contains([]string{DisabledByOwner, DisabledByEntitlement, DisabledByImport}, *r.DisabledReason):
		return in, *r.DisabledReason, nil
	}
	return in, "", fmt.Errorf("state %q does not match its disabled_reason and disabled_at", r.State)
}
