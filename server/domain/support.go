package domain

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
)

// Support access (RFD 22): the operator says who its support people are (the support source);
// an organization's owners let them read its inventory for a time (a support grant). Nothing
// the operator holds creates or extends a grant: the only functions that write one take an
// owner (CreateSupportGrant, RevokeSupportGrant), and only the owner API calls them.

// SupportSource is who the operator's support people are: people who sign in with ProviderID
// whose verified email is listed or in the domain.
type SupportSource struct {
	Enabled            bool      `db:"enabled"`
	ProviderID         *string   `db:"provider_id"`
	AllowedEmails      []string  `db:"allowed_emails"`
	AllowedEmailDomain *string   `db:"allowed_email_domain"`
	Version            int64     `db:"version"`
	UpdatedAt          time.Time `db:"updated_at"`
}

const supportSourceColumns = `enabled, provider_id, allowed_emails, allowed_email_domain, version, updated_at`

// GetSupportSource reads the support source.
func GetSupportSource(ctx context.Context, q db.DBTX) (SupportSource, error) {
	return readSupportSource(ctx, q, "")
}

func readSupportSource(ctx context.Context, q db.DBTX, lock string) (SupportSource, error) {
	rows, err := q.Query(ctx, `SELECT `+supportSourceColumns+` FROM support_source `+lock)
	if err != nil {
		return SupportSource{}, err
	}
	s, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[SupportSource])
	return s, db.Translate(err)
}

// Names reports whether the person who signed in with providerID, with this verified email,
// is one of the support people.
func (s SupportSource) Names(providerID, email string) bool {
	if s.ProviderID == nil || *s.ProviderID != providerID {
		return false
	}
	return s.NamesEmail(email)
}

// NamesEmail reports whether the support source, enabled, names this email (listed or in its
// domain), whatever provider vouches for it: a local recovery bypasses the identity provider,
// never the support source.
func (s SupportSource) NamesEmail(email string) bool {
	if !s.Enabled {
		return false
	}
	email = strings.ToLower(email)
	if slices.Contains(s.AllowedEmails, email) {
		return true
	}
	_, domain, ok := strings.Cut(email, "@")
	return ok && s.AllowedEmailDomain != nil && domain == *s.AllowedEmailDomain
}

// SupportSourceWrite is a PUT of the support source: whole, absent fields take their defaults.
type SupportSourceWrite struct {
	Enabled            bool
	ProviderID         *string
	AllowedEmails      []string
	AllowedEmailDomain *string
}

// PutSupportSource replaces the support source if the stored version is expected. An enabled
// source must name a provider that exists (stored or from the environment) and at least one
// email or a domain; a disabled one may name a provider, which must exist too. While an enabled
// source names one, DeleteIdentityProvider refuses to delete that provider (ErrProviderInUse).
func (p Providers) PutSupportSource(ctx context.Context, q db.DBTX, expected int64, w SupportSourceWrite) (SupportSource, []string, error) {
	emails := make([]string, 0, len(w.AllowedEmails))
	for _, e := range w.AllowedEmails {
		emails = append(emails, strings.ToLower(e))
	}
	slices.Sort(emails)
	emails = slices.Compact(emails)
	if w.AllowedEmailDomain != nil {
		d := strings.ToLower(*w.AllowedEmailDomain)
		w.AllowedEmailDomain = &d
	}
	if w.Enabled {
		if w.ProviderID == nil {
			return SupportSource{}, nil, &ValidationError{Field: "provider_id", Message: "is required when enabled"}
		}
		if len(emails) == 0 && w.AllowedEmailDomain == nil {
			return SupportSource{}, nil, &ValidationError{Field: "allowed_emails",
				Message: "an enabled support source names its people: allowed_emails, allowed_email_domain or both"}
		}
	}
	if w.ProviderID != nil {
		// Under the guard's lock, as DeleteIdentityProvider checks the source: the provider
		// cannot be deleted between this check and the commit.
		if err := lockProviders(ctx, q); err != nil {
			return SupportSource{}, nil, err
		}
		if _, err := p.GetIdentityProvider(ctx, q, *w.ProviderID); errors.Is(err, ErrNotFound) {
			return SupportSource{}, nil, &ValidationError{Field: "provider_id", Message: "names no identity provider of this deployment"}
		} else if err != nil {
			return SupportSource{}, nil, err
		}
	}
	old, err := readSupportSource(ctx, q, "FOR UPDATE")
	if err != nil {
		return SupportSource{}, nil, err
	}
	if old.Version != expected {
		return SupportSource{}, nil, &VersionMismatchError{Current: old.Version}
	}
	rows, err := q.Query(ctx, `UPDATE support_source SET enabled = $1, provider_id = $2, allowed_emails = $3,
		allowed_email_domain = $4, version = version + 1, updated_at = now() RETURNING `+supportSourceColumns,
		w.Enabled, w.ProviderID, emails, w.AllowedEmailDomain)
	if err != nil {
		return SupportSource{}, nil, err
	}
	s, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[SupportSource])
	if err != nil {
		return SupportSource{}, nil, err
	}
	var changed []string
	if old.Enabled != s.Enabled {
		changed = append(changed, "enabled")
	}
	if !equalPtr(old.ProviderID, s.ProviderID) {
		changed = append(changed, "provider_id")
	}
	if !slices.Equal(old.AllowedEmails, s.AllowedEmails) {
		changed = append(changed, "allowed_emails")
	}
	if !equalPtr(old.AllowedEmailDomain, s.AllowedEmailDomain) {
		changed = append(changed, "allowed_email_domain")
	}
	return s, changed, nil
}

func equalPtr[T comparable](a, b *T) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// Support grant states.
const (
	GrantActive  = "active"
	GrantExpired = "expired"
	GrantRevoked = "revoked"
)

// MaxSupportGrant is the longest a grant may last.
const MaxSupportGrant = 30 * 24 * time.Hour

// SupportGrant is a grant an organization's owner made.
type SupportGrant struct {
	ID             string     `db:"id"`
	OrganizationID string     `db:"organization_id"`
	SupportEmail   *string    `db:"support_email"`
	GrantedBy      string     `db:"granted_by"`
	GrantedByEmail string     `db:"granted_by_email"`
	GrantedAt      time.Time  `db:"granted_at"`
	ExpiresAt      time.Time  `db:"expires_at"`
	RevokedAt      *time.Time `db:"revoked_at"`
	State          string     `db:"state"`
}

const supportGrantColumns = `id, organization_id, support_email, granted_by, granted_by_email, granted_at, expires_at, revoked_at,
	CASE WHEN revoked_at IS NOT NULL THEN 'revoked' WHEN expires_at <= now() THEN 'expired' ELSE 'active' END AS state`

// CreateSupportGrant stores an owner's grant: until expiresAt (in the future, at most
// MaxSupportGrant ahead), for one support person (supportEmail) or any (nil).
func CreateSupportGrant(ctx context.Context, q db.DBTX, orgID, userID string, expiresAt time.Time, supportEmail *string) (SupportGrant, error) {
	now := time.Now()
	switch {
	case !expiresAt.After(now):
		return SupportGrant{}, &ValidationError{Field: "expires_at", Message: "must be in the future"}
	case expiresAt.After(now.Add(MaxSupportGrant)):
		return SupportGrant{}, &ValidationError{Field: "expires_at", Message: "must be at most 30 days ahead"}
	}
	if supportEmail != nil {
		e := strings.ToLower(*supportEmail)
		supportEmail = &e
	}
	rows, err := q.Query(ctx, `INSERT INTO support_grants (id, organization_id, support_email, granted_by, granted_by_email, expires_at)
		SELECT $1, $2, $3, id, email, $5 FROM users WHERE id = $4
		RETURNING `+supportGrantColumns, db.NewID("grt"), orgID, supportEmail, userID, expiresAt)
	if err != nil {
		return SupportGrant{}, err
	}
	g, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[SupportGrant])
	return g, db.Translate(err)
}

// ListSupportGrants pages through an organization's grants, newest first.
func ListSupportGrants(ctx context.Context, q db.DBTX, orgID, before string, limit int) ([]SupportGrant, error) {
	rows, err := q.Query(ctx, `SELECT `+supportGrantColumns+` FROM support_grants
		WHERE organization_id = $1 AND ($2 = '' OR id < $2) ORDER BY id DESC LIMIT $3`, orgID, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[SupportGrant])
}

// RevokeSupportGrant ends one of the organization's grants now; a revoked or expired grant is
// returned as it is (changed false).
func RevokeSupportGrant(ctx context.Context, q db.DBTX, orgID, grantID, userID string) (SupportGrant, bool, error) {
	rows, err := q.Query(ctx, `UPDATE support_grants SET revoked_at = now(), revoked_by = $3
		WHERE organization_id = $1 AND id = $2 AND revoked_at IS NULL AND expires_at > now()
		RETURNING `+supportGrantColumns, orgID, grantID, userID)
	if err != nil {
		return SupportGrant{}, false, err
	}
	g, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[SupportGrant])
	if err == nil {
		return g, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return g, false, err
	}
	rows, err = q.Query(ctx, `SELECT `+supportGrantColumns+` FROM support_grants WHERE organization_id = $1 AND id = $2`, orgID, grantID)
	if err != nil {
		return SupportGrant{}, false, err
	}
	g, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[SupportGrant])
	return g, false, db.Translate(err)
}

// GrantedOrganization is an organization a support person may read now, and until when.
type GrantedOrganization struct {
	ID          string    `db:"id"`
	Slug        string    `db:"slug"`
	DisplayName string    `db:"display_name"`
	Until       time.Time `db:"until"`
}

// activeGrantFor is the condition of a grant that lets the support person with email ($1) in
// now: not revoked, not expired, for them or for any support person, of an active
// organization. A suspended organization's owners cannot write (so cannot revoke), so its
// grants let nobody in until it is active again and its owners can revoke them.
const activeGrantFor = `g.revoked_at IS NULL AND g.expires_at > now() AND (g.support_email IS NULL OR g.support_email = lower($1))
	AND o.state = 'active'`

// GrantedOrganizations are the organizations whose owners let the support person with email
// read them now.
func GrantedOrganizations(ctx context.Context, q db.DBTX, email string) ([]GrantedOrganization, error) {
	rows, err := q.Query(ctx, `SELECT o.id, o.slug, o.display_name, max(g.expires_at) AS until
		FROM support_grants g JOIN organizations o ON o.id = g.organization_id
		WHERE `+activeGrantFor+` GROUP BY o.id, o.slug, o.display_name ORDER BY o.display_name, o.id`, email)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[GrantedOrganization])
}

// GrantedOrganizationByID is one organization the support person may read now, or ErrNotFound
// (no such organization, or no active grant for them: one answer, no hint which).
func GrantedOrganizationByID(ctx context.Context, q db.DBTX, email, orgID string) (GrantedOrganization, error) {
	rows, err := q.Query(ctx, `SELECT o.id, o.slug, o.display_name, max(g.expires_at) AS until
		FROM support_grants g JOIN organizations o ON o.id = g.organization_id
		WHERE `+activeGrantFor+` AND o.id = $2 GROUP BY o.id, o.slug, o.display_name`, email, orgID)
	if err != nil {
		return GrantedOrganization{}, err
	}
	g, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[GrantedOrganization])
	return g, db.Translate(err)
}

// SupportRead is the audit event (and Activity entry) of one read a support person made in
// an organization: who (their session, their email), what (operation), when.
func SupportRead(s DeploymentSession, o GrantedOrganization, operation, requestID, source string) AuditEvent {
	return AuditEvent{RequestID: requestID, ActorType: ActorSupportPerson, ActorID: s.ID, ActorName: s.Email,
		Operation: operation, OrganizationID: &o.ID, OrganizationNameSnapshot: &o.DisplayName,
		Outcome: OutcomeSucceeded, Status: 200, SourceAddress: source, Read: true}
}
