package domain

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
)

// Environment identity providers (RENGA_IDENTITY_PROVIDERS): read-only, parsed at start, and
// checked against the stored providers they may override.

// EnvProvider is one provider of RENGA_IDENTITY_PROVIDERS.
type EnvProvider struct {
	Slug         string `json:"slug"`
	Protocol     string `json:"protocol"`
	Issuer       string `json:"issuer"`
	ClientSecret string `json:"client_secret"`
	ProviderConfig
}

// ID is the environment provider's ID: stable across restarts, derived from its slug.
func (e EnvProvider) ID() string {
	sum := sha256.Sum256([]byte("environment identity provider " + e.Slug))
	hi, lo := binary.BigEndian.Uint64(sum[0:8]), binary.BigEndian.Uint64(sum[8:16])
	out := make([]byte, 26)
	for i := 25; i >= 0; i-- {
		out[i] = "0123456789abcdefghjkmnpqrstvwxyz"[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return "idp_" + string(out)
}

func (e EnvProvider) view() IdentityProvider {
	one := int64(1)
	return IdentityProvider{ID: e.ID(), Slug: e.Slug, Protocol: e.Protocol, Issuer: e.Issuer,
		Source: ProviderEnvironment, State: ProviderEnabled, ProviderConfig: e.ProviderConfig,
		Revision: 1, ActiveRevision: &one, Version: 1}
}

// ParseEnvProviders reads RENGA_IDENTITY_PROVIDERS: a JSON array of providers, each with slug,
// protocol, issuer, display_name, client_id, and optionally client_secret, scopes and
// allowed_email_domains. Empty is none.
func ParseEnvProviders(s string) ([]EnvProvider, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	var list []EnvProvider
	if err := dec.Decode(&list); err != nil {
		return nil, fmt.Errorf("must be a JSON array of providers: %w", err)
	}
	if dec.More() {
		return nil, errors.New("must be one JSON array")
	}
	seen := map[string]bool{}
	for i, p := range list {
		where := fmt.Sprintf("provider %d (%q)", i+1, p.Slug)
		if !providerSlugPattern.MatchString(p.Slug) {
			return nil, fmt.Errorf("%s: slug must match %s", where, providerSlugPattern)
		}
		if seen[p.Slug] {
			return nil, fmt.Errorf("%s: slug appears twice", where)
		}
		seen[p.Slug] = true
		if p.Protocol != "oidc" {
			return nil, fmt.Errorf("%s: protocol must be \"oidc\"", where)
		}
		if err := CheckIssuer(p.Issuer); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		cfg, err := p.normalized()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		list[i].ProviderConfig = cfg
	}
	return list, nil
}

func (p Providers) env(idOrSlug string) (EnvProvider, bool) {
	for _, e := range p.Env {
		if e.ID() == idOrSlug || e.Slug == idOrSlug {
			return e, true
		}
	}
	return EnvProvider{}, false
}

// CheckEnvProviders refuses an environment provider that shares its slug with a stored provider
// of another protocol or issuer (such a collision refuses boot); a compatible one overrides the
// stored provider.
func (p Providers) CheckEnvProviders(ctx context.Context, q db.DBTX) error {
	var errs []error
	for _, e := range p.Env {
		var id, protocol, issuer string
		err := q.QueryRow(ctx, `SELECT id, protocol, issuer FROM identity_providers WHERE slug = $1`, e.Slug).Scan(&id, &protocol, &issuer)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return err
		}
		if protocol != e.Protocol || issuer != e.Issuer {
			errs = append(errs, fmt.Errorf("environment provider %q (%s %s) collides with stored provider %s (%s %s): the slug is the same but the protocol or issuer differs",
				e.Slug, e.Protocol, e.Issuer, id, protocol, issuer))
		}
	}
	return errors.Join(errs...)
}
