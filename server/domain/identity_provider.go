package domain

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/secretbox"
)

// Deployment identity providers (DESIGN §6). A provider's slug, protocol and issuer never
// change; its configuration is written as revisions. A write stores a pending revision; a
// successful test activates it, and the active revision serves sign-in. Environment providers
// (RENGA_IDENTITY_PROVIDERS) are read-only. One serialized guard (ProviderGuardLock) covers
// every change and refuses one that would leave the deployment with no usable sign-in method.

// Provider sources and states.
const (
	ProviderStored      = "stored"
	ProviderEnvironment = "environment"
	ProviderEnabled     = "enabled"
	ProviderDisabled    = "disabled"
)

// ProviderConfig is a provider's configuration: what a revision holds, besides the secret.
type ProviderConfig struct {
	DisplayName         string   `json:"display_name"`
	ClientID            string   `json:"client_id"`
	Scopes              []string `json:"scopes"`
	AllowedEmailDomains []string `json:"allowed_email_domains"`
}

// IdentityProvider is a provider as the API shows it: its identity, its latest configuration
// and its revisions. It never holds the client secret.
type IdentityProvider struct {
	ID, Slug, Protocol, Issuer string
	Source, State              string
	ProviderConfig
	Revision        int64
	ActiveRevision  *int64
	PendingRevision *int64
	Version         int64
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// Providers is what the provider functions need besides the database: the environment's
// providers and the box that seals client secrets (nil when the deployment has no key).
type Providers struct {
	Env     []EnvProvider
	Secrets *secretbox.Box
}

// providerAAD binds a sealed client secret to its provider.
func providerAAD(id string) string { return "identity_provider:" + id }

// ProviderGuardLock is the one lock every provider change takes first (DESIGN §6: the
// serialized guard), so that two changes never both see a usable method the other removes. A
// support source write that names a provider takes it too (PutSupportSource), so a provider
// is never deleted while a source naming it is being written.
const ProviderGuardLock = 7_346_553_210_001

func lockProviders(ctx context.Context, q db.DBTX) error {
	_, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(ProviderGuardLock))
	return err
}

const providerColumns = `p.id, p.slug, p.protocol, p.issuer, p.state, p.revision, p.active_revision,
	p.pending_revision, p.version, p.created_at, p.updated_at,
	r.display_name, r.client_id, r.scopes, r.allowed_email_domains`

func scanProvider(row pgx.Row) (IdentityProvider, error) {
	ip := IdentityProvider{Source: ProviderStored}
	err := row.Scan(&ip.ID, &ip.Slug, &ip.Protocol, &ip.Issuer, &ip.State, &ip.Revision, &ip.ActiveRevision,
		&ip.PendingRevision, &ip.Version, &ip.CreatedAt, &ip.UpdatedAt,
		&ip.DisplayName, &ip.ClientID, &ip.Scopes, &ip.AllowedEmailDomains)
	return ip, db.Translate(err)
}

// ListIdentityProviders lists environment and stored providers by slug, after the slug after;
// a stored provider an environment provider overrides is not listed.
func (p Providers) ListIdentityProviders(ctx context.Context, q db.DBTX, after string, limit int) ([]IdentityProvider, error) {
	envSlugs := make([]string, 0, len(p.Env))
	for _, e := range p.Env {
		envSlugs = append(envSlugs, e.Slug)
	}
	rows, err := q.Query(ctx, `SELECT `+providerColumns+` FROM identity_providers p
		JOIN identity_provider_revisions r ON r.provider_id = p.id AND r.revision = p.revision
		WHERE p.slug > $1 AND p.slug <> ALL($2) ORDER BY p.slug LIMIT $3`, after, envSlugs, limit)
	if err != nil {
		return nil, err
	}
	var list []IdentityProvider
	for rows.Next() {
		ip, err := scanProvider(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		list = append(list, ip)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, e := range p.Env {
		if e.Slug > after {
			list = append(list, e.view())
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Slug < list[j].Slug })
	if len(list) > limit {
		list = list[:limit]
	}
	return list, nil
}

// GetIdentityProvider reads one provider by ID.
func (p Providers) GetIdentityProvider(ctx context.Context, q db.DBTX, id string) (IdentityProvider, error) {
	if e, ok := p.env(id); ok {
		return e.view(), nil
	}
	return p.readProvider(ctx, q, id, "")
}

func (p Providers) readProvider(ctx context.Context, q db.DBTX, id, lock string) (IdentityProvider, error) {
	ip, err := scanProvider(q.QueryRow(ctx, `SELECT `+providerColumns+` FROM identity_providers p
		JOIN identity_provider_revisions r ON r.provider_id = p.id AND r.revision = p.revision
		WHERE p.id = $1 `+lock, id))
	if err != nil {
		return ip, err
	}
	if _, overridden := p.env(ip.Slug); overridden {
		// Overridden by the environment: that one is what the deployment uses.
		return IdentityProvider{}, ErrNotFound
	}
	return ip, nil
}

// NewProvider is a provider to create.
type NewProvider struct {
	Slug, Protocol, Issuer string
	ProviderConfig
	ClientSecret *string
}

// SecretChange is what a write does to the client secret: keep it (the field left out),
// replace it, or clear it.
type SecretChange struct {
	Replace *string
	Clear   bool
}

// ProviderWrite is a provider's configuration written whole. Slug, Protocol and Issuer, when
// set, must equal the stored values (a GET body written back carries them).
type ProviderWrite struct {
	ProviderConfig
	Secret                 SecretChange
	Slug, Protocol, Issuer *string
}

func (p Providers) seal(id string, secret *string) ([]byte, error) {
	if secret == nil {
		return nil, nil
	}
	if p.Secrets == nil {
		return nil, ErrNoSecretKey
	}
	return p.Secrets.Seal([]byte(*secret), providerAAD(id)), nil
}

// CreateIdentityProvider stores a provider whose first revision is pending. The issuer is not
// contacted: discovery happens when a test starts.
func (p Providers) CreateIdentityProvider(ctx context.Context, q db.DBTX, in NewProvider) (IdentityProvider, error) {
	if err := lockProviders(ctx, q); err != nil {
		return IdentityProvider{}, err
	}
	if err := CheckIssuer(in.Issuer); err != nil {
		return IdentityProvider{}, err
	}
	cfg, err := in.normalized()
	if err != nil {
		return IdentityProvider{}, err
	}
	if _, taken := p.env(in.Slug); taken {
		return IdentityProvider{}, ErrSlugTaken
	}
	id := db.NewID("idp")
	sealed, err := p.seal(id, in.ClientSecret)
	if err != nil {
		return IdentityProvider{}, err
	}
	tag, err := q.Exec(ctx, `INSERT INTO identity_providers (id, slug, protocol, issuer, revision, pending_revision)
		VALUES ($1, $2, $3, $4, 1, 1) ON CONFLICT (slug) DO NOTHING`, id, in.Slug, in.Protocol, in.Issuer)
	if err != nil {
		return IdentityProvider{}, err
	}
	if tag.RowsAffected() == 0 {
		return IdentityProvider{}, ErrSlugTaken
	}
	if _, err := q.Exec(ctx, `INSERT INTO identity_provider_revisions (provider_id, revision, display_name, client_id, client_secret, scopes, allowed_email_domains)
		VALUES ($1, 1, $2, $3, $4, $5, $6)`, id, cfg.DisplayName, cfg.ClientID, sealed, cfg.Scopes, cfg.AllowedEmailDomains); err != nil {
		return IdentityProvider{}, err
	}
	return p.readProvider(ctx, q, id, "")
}

// PutIdentityProvider writes a provider's configuration as a new pending revision, if its
// version is still expected. It returns the names of the fields that changed.
func (p Providers) PutIdentityProvider(ctx context.Context, q db.DBTX, id string, expected int64, w ProviderWrite) (IdentityProvider, []string, error) {
	if err := lockProviders(ctx, q); err != nil {
		return IdentityProvider{}, nil, err
	}
	if _, ok := p.env(id); ok {
		return IdentityProvider{}, nil, ErrReadOnly
	}
	old, err := p.readProvider(ctx, q, id, "FOR UPDATE OF p")
	if err != nil {
		return IdentityProvider{}, nil, err
	}
	if old.Version != expected {
		return IdentityProvider{}, nil, &VersionMismatchError{Current: old.Version}
	}
	for _, f := range []struct {
		name   string
		given  *string
		stored string
	}{{"slug", w.Slug, old.Slug}, {"protocol", w.Protocol, old.Protocol}, {"issuer", w.Issuer, old.Issuer}} {
		if f.given != nil && *f.given != f.stored {
			return IdentityProvider{}, nil, &ValidationError{Field: f.name, Message: fmt.Sprintf("is immutable (it is %q)", f.stored)}
		}
	}
	cfg, err := w.normalized()
	if err != nil {
		return IdentityProvider{}, nil, err
	}
	var stored []byte
	if err := q.QueryRow(ctx, `SELECT client_secret FROM identity_provider_revisions WHERE provider_id = $1 AND revision = $2`,
		id, old.Revision).Scan(&stored); err != nil {
		return IdentityProvider{}, nil, err
	}
	changed := changedProviderFields(old.ProviderConfig, cfg)
	switch {
	case w.Secret.Clear:
		if old.State != ProviderDisabled {
			return IdentityProvider{}, nil, ErrProviderEnabled
		}
		if stored != nil {
			changed = append(changed, "client_secret")
		}
		stored = nil
	case w.Secret.Replace != nil:
		if stored, err = p.seal(id, w.Secret.Replace); err != nil {
			return IdentityProvider{}, nil, err
		}
		changed = append(changed, "client_secret")
	}
	next := old.Revision + 1
	if _, err := q.Exec(ctx, `INSERT INTO identity_provider_revisions (provider_id, revision, display_name, client_id, client_secret, scopes, allowed_email_domains)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, id, next, cfg.DisplayName, cfg.ClientID, stored, cfg.Scopes, cfg.AllowedEmailDomains); err != nil {
		return IdentityProvider{}, nil, err
	}
	if _, err := q.Exec(ctx, `UPDATE identity_providers SET revision = $2, pending_revision = $2, version = version + 1, updated_at = now()
		WHERE id = $1`, id, next); err != nil {
		return IdentityProvider{}, nil, err
	}
	ip, err := p.readProvider(ctx, q, id, "")
	return ip, changed, err
}

func changedProviderFields(a, b ProviderConfig) []string {
	var changed []string
	if a.DisplayName != b.DisplayName {
		changed = append(changed, "display_name")
	}
	if a.ClientID != b.ClientID {
		changed = append(changed, "client_id")
	}
	if !slices.Equal(a.Scopes, b.Scopes) {
		changed = append(changed, "scopes")
	}
	if !slices.Equal(a.AllowedEmailDomains, b.AllowedEmailDomains) {
		changed = append(changed, "allowed_email_domains")
	}
	return changed
}

// usableSignIn counts the deployment's usable sign-in methods: enabled providers with an
// active revision, stored or from the environment (which are always enabled and active), and
// local recovery while a recovery can still be used (unused, unrevoked, unexpired: one method
// however many there are). So after `renga identity-provider recover-local` the last provider
// can be disabled or deleted; once the recovery is used or expires, it no longer counts.
func (p Providers) usableSignIn(ctx context.Context, q db.DBTX) (int, error) {
	envSlugs := make([]string, 0, len(p.Env))
	for _, e := range p.Env {
		envSlugs = append(envSlugs, e.Slug)
	}
	var n int
	if err := q.QueryRow(ctx, `SELECT count(*) FROM identity_providers
		WHERE state = 'enabled' AND active_revision IS NOT NULL AND slug <> ALL($1)`, envSlugs).Scan(&n); err != nil {
		return 0, err
	}
	recoveries, err := openLocalRecoveries(ctx, q)
	if recoveries > 0 {
		n++
	}
	return n + len(p.Env), err
}

func usable(ip IdentityProvider) bool {
	return ip.State == ProviderEnabled && ip.ActiveRevision != nil
}

// guardRemoval refuses removing ip from service when it is the deployment's last usable
// sign-in method. Call it holding the guard's lock.
func (p Providers) guardRemoval(ctx context.Context, q db.DBTX, ip IdentityProvider) error {
	if !usable(ip) {
		return nil
	}
	n, err := p.usableSignIn(ctx, q)
	if err != nil {
		return err
	}
	if n <= 1 {
		return ErrLockout
	}
	return nil
}

// DisableIdentityProvider stops a provider serving sign-in (target-state idempotent). It
// reports whether anything changed.
func (p Providers) DisableIdentityProvider(ctx context.Context, q db.DBTX, id string) (IdentityProvider, bool, error) {
	if err := lockProviders(ctx, q); err != nil {
		return IdentityProvider{}, false, err
	}
	if _, ok := p.env(id); ok {
		return IdentityProvider{}, false, ErrReadOnly
	}
	ip, err := p.readProvider(ctx, q, id, "FOR UPDATE OF p")
	if err != nil || ip.State == ProviderDisabled {
		return ip, false, err
	}
	if err := p.guardRemoval(ctx, q, ip); err != nil {
		return IdentityProvider{}, false, err
	}
	if _, err := q.Exec(ctx, `UPDATE identity_providers SET state = 'disabled', version = version + 1, updated_at = now() WHERE id = $1`, id); err != nil {
		return IdentityProvider{}, false, err
	}
	ip, err = p.readProvider(ctx, q, id, "")
	return ip, true, err
}

// DeleteIdentityProvider removes a provider and its revisions.
func (p Providers) DeleteIdentityProvider(ctx context.Context, q db.DBTX, id string) (IdentityProvider, error) {
	if err := lockProviders(ctx, q); err != nil {
		return IdentityProvider{}, err
	}
	if _, ok := p.env(id); ok {
		return IdentityProvider{}, ErrReadOnly
	}
	ip, err := p.readProvider(ctx, q, id, "FOR UPDATE OF p")
	if err != nil {
		return ip, err
	}
	// Support people sign in through the provider an enabled support source names: it stays.
	// (A disabled source's provider_id is only remembered; once its provider is gone, enabling
	// the source again is refused until it names one that exists.) The support source has no
	// foreign key to its provider (an environment provider has no row); it is read under the
	// guard's lock, which PutSupportSource takes too, so a source naming this provider cannot
	// be written between this check and the delete.
	var inUse bool
	if err := q.QueryRow(ctx, `SELECT coalesce(enabled AND provider_id = $1, false) FROM support_source`, id).Scan(&inUse); err != nil {
		return IdentityProvider{}, err
	}
	if inUse {
		return IdentityProvider{}, ErrProviderInUse
	}
	if err := p.guardRemoval(ctx, q, ip); err != nil {
		return IdentityProvider{}, err
	}
	_, err = q.Exec(ctx, `DELETE FROM identity_providers WHERE id = $1`, id)
	return ip, err
}

// ProviderClientSecret opens the client secret of a provider's revision (sign-in and tests
// need it; nothing shows it). ok is false when the revision has none.
func (p Providers) ProviderClientSecret(ctx context.Context, q db.DBTX, id string, revision int64) (string, bool, error) {
	if e, ok := p.env(id); ok {
		return e.ClientSecret, e.ClientSecret != "", nil
	}
	var sealed []byte
	if err := q.QueryRow(ctx, `SELECT client_secret FROM identity_provider_revisions WHERE provider_id = $1 AND revision = $2`,
		id, revision).Scan(&sealed); err != nil {
		return "", false, db.Translate(err)
	}
	if sealed == nil {
		return "", false, nil
	}
	if p.Secrets == nil {
		return "", false, ErrNoSecretKey
	}
	plain, err := p.Secrets.Open(sealed, providerAAD(id))
	if err != nil {
		return "", false, err
	}
	return string(bytes.Clone(plain)), true, nil
}

// ResealProviderSecrets re-seals every stored client secret that is not under the box's
// current key (key rotation: after it, RENGA_SECRET_KEY_PREVIOUS can be dropped). It returns
// how many it re-sealed. A secret the box cannot open fails the whole rotation.
func ResealProviderSecrets(ctx context.Context, q db.DBTX, box *secretbox.Box) (int, error) {
	if box == nil {
		return 0, ErrNoSecretKey
	}
	if err := lockProviders(ctx, q); err != nil {
		return 0, err
	}
	type sealedRow struct {
		providerID string
		revision   int64
		sealed     []byte
	}
	rows, err := q.Query(ctx, `SELECT provider_id, revision, client_secret FROM identity_provider_revisions
		WHERE client_secret IS NOT NULL ORDER BY provider_id, revision FOR UPDATE`)
	if err != nil {
		return 0, err
	}
	var stale []sealedRow
	for rows.Next() {
		var r sealedRow
		if err := rows.Scan(&r.providerID, &r.revision, &r.sealed); err != nil {
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
		plain, err := box.Open(r.sealed, providerAAD(r.providerID))
		if err != nil {
			return 0, fmt.Errorf("provider %s revision %d: %w", r.providerID, r.revision, err)
		}
		if _, err := q.Exec(ctx, `UPDATE identity_provider_revisions SET client_secret = $3 WHERE provider_id = $1 AND revision = $2`,
			r.providerID, r.revision, box.Seal(plain, providerAAD(r.providerID))); err != nil {
			return 0, err
		}
	}
	n, err := resealOrganizationProviderSecrets(ctx, q, box)
	return len(stale) + n, err
}
