package domain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
)

// Limits are an organization's quantitative limits; nil means "not set here".
type Limits struct {
	MaxAgents                *int64 `json:"max_agents,omitempty"`
	MaxUsers                 *int64 `json:"max_users,omitempty"`
	IntakeBytesPerDay        *int64 `json:"intake_bytes_per_day,omitempty"`
	ObservationRetentionDays *int64 `json:"observation_retention_days,omitempty"`
	MaxJobsPerDay            *int64 `json:"max_jobs_per_day,omitempty"`
}

// LockedSettings are settings a policy locks to a value; nil means "not locked here".
type LockedSettings struct {
	RequireSSO          *bool     `json:"require_sso,omitempty"`
	RequireMFA          *bool     `json:"require_mfa,omitempty"`
	SessionMaxAgeHours  *int64    `json:"session_max_age_hours,omitempty"`
	AllowedEmailDomains *[]string `json:"allowed_email_domains,omitempty"`
}

// Entitlements switch features on or off; nil means "not set here".
type Entitlements struct {
	OrganizationIdentityProviders *bool `json:"organization_identity_providers,omitempty"`
	Jobs                          *bool `json:"jobs,omitempty"`
	OwnerExport                   *bool `json:"owner_export,omitempty"`
}

// PolicyDocument is an organization's policy, or the deployment's defaults (same shape).
type PolicyDocument struct {
	Limits         Limits         `json:"limits"`
	LockedSettings LockedSettings `json:"locked_settings"`
	Entitlements   Entitlements   `json:"entitlements"`
}

// Policy is a stored policy document with its version.
type Policy struct {
	OrganizationID string
	Document       PolicyDocument
	Version        int64
}

func ptr[T any](v T) *T { return &v }

// BuiltinDefaults apply where neither the organization's policy nor RENGA_POLICY_DEFAULTS say.
var BuiltinDefaults = PolicyDocument{
	Limits: Limits{
		MaxAgents:                ptr[int64](1000),
		MaxUsers:                 ptr[int64](100),
		IntakeBytesPerDay:        ptr[int64](10 << 30),
		ObservationRetentionDays: ptr[int64](90),
		MaxJobsPerDay:            ptr[int64](10000),
	},
	Entitlements: Entitlements{
		OrganizationIdentityProviders: ptr(true),
		Jobs:                          ptr(true),
		OwnerExport:                   ptr(false),
	},
}

// ParsePolicyDefaults reads RENGA_POLICY_DEFAULTS: a policy document whose limits and
// entitlements override the built-in defaults and whose locked settings lock for every
// organization that does not lock them itself. Unknown fields and bad values are refused.
func ParsePolicyDefaults(s string) (PolicyDocument, error) {
	d := BuiltinDefaults
	if s == "" {
		return d, nil
	}
	var doc PolicyDocument
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return d, fmt.Errorf("not a policy document: %w", err)
	}
	if dec.More() {
		return d, errors.New("not a policy document: trailing data")
	}
	if err := doc.Validate(); err != nil {
		return d, err
	}
	mergeLimits(&d.Limits, doc.Limits)
	mergeEntitlements(&d.Entitlements, doc.Entitlements)
	d.LockedSettings = doc.LockedSettings
	return d, nil
}

// Validate checks what the API's schema checks, for documents that do not come through it.
func (p PolicyDocument) Validate() error {
	l := p.Limits
	for _, c := range []struct {
		name string
		v    *int64
		min  int64
		max  int64
	}{
		{"limits.max_agents", l.MaxAgents, 0, 1 << 62},
		{"limits.max_users", l.MaxUsers, 1, 1 << 62},
		{"limits.intake_bytes_per_day", l.IntakeBytesPerDay, 0, 1 << 62},
		{"limits.observation_retention_days", l.ObservationRetentionDays, 1, 3650},
		{"limits.max_jobs_per_day", l.MaxJobsPerDay, 0, 1 << 62},
		{"locked_settings.session_max_age_hours", p.LockedSettings.SessionMaxAgeHours, 1, 720},
	} {
		if c.v != nil && (*c.v < c.min || *c.v > c.max) {
			return &ValidationError{Field: c.name, Message: fmt.Sprintf("must be between %d and %d", c.min, c.max)}
		}
	}
	return nil
}

func mergeLimits(dst *Limits, src Limits) {
	for _, f := range []struct{ dst, src **int64 }{
		{&dst.MaxAgents, &src.MaxAgents}, {&dst.MaxUsers, &src.MaxUsers},
		{&dst.IntakeBytesPerDay, &src.IntakeBytesPerDay}, {&dst.ObservationRetentionDays, &src.ObservationRetentionDays},
		{&dst.MaxJobsPerDay, &src.MaxJobsPerDay},
	} {
		if *f.src != nil {
			*f.dst = *f.src
		}
	}
}

func mergeEntitlements(dst *Entitlements, src Entitlements) {
	for _, f := range []struct{ dst, src **bool }{
		{&dst.OrganizationIdentityProviders, &src.OrganizationIdentityProviders},
		{&dst.Jobs, &src.Jobs}, {&dst.OwnerExport, &src.OwnerExport},
	} {
		if *f.src != nil {
			*f.dst = *f.src
		}
	}
}

// GetPolicy reads an organization's policy document.
func GetPolicy(ctx context.Context, q db.DBTX, orgID string) (Policy, error) {
	p := Policy{OrganizationID: orgID}
	var raw []byte
	err := q.QueryRow(ctx, `SELECT document, version FROM organization_policies WHERE organization_id = $1`, orgID).Scan(&raw, &p.Version)
	if err != nil {
		return p, db.Translate(err)
	}
	return p, json.Unmarshal(raw, &p.Document)
}

// PutPolicy replaces the policy document if the stored version is expected. When the change
// withdraws the organization_identity_providers entitlement, the reduction runs in the same
// transaction, before the caller's response.
func PutPolicy(ctx context.Context, q db.DBTX, orgID string, expected int64, doc PolicyDocument, defaults PolicyDocument) (Policy, []string, error) {
	if err := doc.Validate(); err != nil {
		return Policy{}, nil, err
	}
	o, err := lockOrganization(ctx, q, orgID)
	if err != nil {
		return Policy{}, nil, err
	}
	if o.State == StatePurging {
		return Policy{}, nil, ErrPurgeStarted
	}
	old, err := lockPolicy(ctx, q, orgID)
	if err != nil {
		return Policy{}, nil, err
	}
	if old.Version != expected {
		return Policy{}, nil, &VersionMismatchError{Current: old.Version}
	}
	if d := doc.LockedSettings.AllowedEmailDomains; d != nil {
		sorted := slices.Clone(*d)
		slices.Sort(sorted)
		sorted = slices.Compact(sorted)
		doc.LockedSettings.AllowedEmailDomains = &sorted
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return Policy{}, nil, err
	}
	p := Policy{OrganizationID: orgID, Document: doc}
	if err := q.QueryRow(ctx, `UPDATE organization_policies SET document = $2, version = version + 1, updated_at = now()
		WHERE organization_id = $1 RETURNING version`, orgID, raw).Scan(&p.Version); err != nil {
		return Policy{}, nil, err
	}
	before := Effective(old.Document, defaults, Settings{})
	after := Effective(doc, defaults, Settings{})
	if before.Entitlements.OrganizationIdentityProviders.Value && !after.Entitlements.OrganizationIdentityProviders.Value {
		if err := WithdrawOrganizationProviders(ctx, q, orgID); err != nil {
			return Policy{}, nil, err
		}
	}
	return p, changedPolicyFields(old.Document, doc), nil
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

// WithdrawOrganizationProviders is the reduction that withdrawing the
// organization_identity_providers entitlement requires (RFD 15 disable, RFD 16 removal of
// memberships and grants bound to those providers). Organizations have no identity providers
// of their own yet, so there is nothing to reduce; the identity-provider work fills this in,
// and it already runs in the policy change's transaction.
func WithdrawOrganizationProviders(ctx context.Context, q db.DBTX, orgID string) error {
	return nil
}

// changedPolicyFields names the leaves that differ, e.g. "limits.max_agents".
func changedPolicyFields(a, b PolicyDocument) []string {
	flat := func(d PolicyDocument) map[string]string {
		out := map[string]string{}
		raw, _ := json.Marshal(d)
		var m map[string]map[string]json.RawMessage
		_ = json.Unmarshal(raw, &m)
		for section, fields := range m {
			for k, v := range fields {
				out[section+"."+k] = string(v)
			}
		}
		return out
	}
	fa, fb := flat(a), flat(b)
	var changed []string
	for k, v := range fa {
		if fb[k] != v {
			changed = append(changed, k)
		}
	}
	for k := range fb {
		if _, ok := fa[k]; !ok {
			changed = append(changed, k)
		}
	}
	slices.Sort(changed)
	return changed
}

// Sources of effective values.
const (
	SourceOrganization = "organization"
	SourceDeployment   = "deployment"
	SourceOwner        = "owner"
)

// Value is an effective value and where it comes from.
type Value[T any] struct {
	Value  T
	Source string
}

// EffectivePolicy is what is in force for an organization.
type EffectivePolicy struct {
	Limits struct {
		MaxAgents, MaxUsers, IntakeBytesPerDay, ObservationRetentionDays, MaxJobsPerDay Value[int64]
	}
	Entitlements struct {
		OrganizationIdentityProviders, Jobs, OwnerExport Value[bool]
	}
	Settings struct {
		RequireSSO, RequireMFA Value[bool]
		SessionMaxAgeHours     Value[int64]
		AllowedEmailDomains    Value[[]string]
	}
}

func pick[T any](org, def *T, builtin T) Value[T] {
	switch {
	case org != nil:
		return Value[T]{*org, SourceOrganization}
	case def != nil:
		return Value[T]{*def, SourceDeployment}
	default:
		return Value[T]{builtin, SourceDeployment}
	}
}

func setting[T any](org, def *T, owner T) Value[T] {
	switch {
	case org != nil:
		return Value[T]{*org, SourceOrganization}
	case def != nil:
		return Value[T]{*def, SourceDeployment}
	default:
		return Value[T]{owner, SourceOwner}
	}
}

// Effective merges an organization's policy over the deployment defaults, and the owners'
// settings under both.
func Effective(p PolicyDocument, d PolicyDocument, s Settings) EffectivePolicy {
	var e EffectivePolicy
	l, dl := p.Limits, d.Limits
	e.Limits.MaxAgents = pick(l.MaxAgents, dl.MaxAgents, 0)
	e.Limits.MaxUsers = pick(l.MaxUsers, dl.MaxUsers, 0)
	e.Limits.IntakeBytesPerDay = pick(l.IntakeBytesPerDay, dl.IntakeBytesPerDay, 0)
	e.Limits.ObservationRetentionDays = pick(l.ObservationRetentionDays, dl.ObservationRetentionDays, 0)
	e.Limits.MaxJobsPerDay = pick(l.MaxJobsPerDay, dl.MaxJobsPerDay, 0)
	en, den := p.Entitlements, d.Entitlements
	e.Entitlements.OrganizationIdentityProviders = pick(en.OrganizationIdentityProviders, den.OrganizationIdentityProviders, false)
	e.Entitlements.Jobs = pick(en.Jobs, den.Jobs, false)
	e.Entitlements.OwnerExport = pick(en.OwnerExport, den.OwnerExport, false)
	ls, dls := p.LockedSettings, d.LockedSettings
	e.Settings.RequireSSO = setting(ls.RequireSSO, dls.RequireSSO, s.RequireSSO)
	e.Settings.RequireMFA = setting(ls.RequireMFA, dls.RequireMFA, s.RequireMFA)
	e.Settings.SessionMaxAgeHours = setting(ls.SessionMaxAgeHours, dls.SessionMaxAgeHours, s.SessionMaxAgeHours)
	e.Settings.AllowedEmailDomains = setting(ls.AllowedEmailDomains, dls.AllowedEmailDomains, s.AllowedEmailDomains)
	return e
}

// Locks is the set of settings locked for an organization (by its policy or the deployment's).
func (e EffectivePolicy) Locks() LockedSettings {
	var l LockedSettings
	if e.Settings.RequireSSO.Source != SourceOwner {
		l.RequireSSO = &e.Settings.RequireSSO.Value
	}
	if e.Settings.RequireMFA.Source != SourceOwner {
		l.RequireMFA = &e.Settings.RequireMFA.Value
	}
	if e.Settings.SessionMaxAgeHours.Source != SourceOwner {
		l.SessionMaxAgeHours = &e.Settings.SessionMaxAgeHours.Value
	}
	if e.Settings.AllowedEmailDomains.Source != SourceOwner {
		l.AllowedEmailDomains = &e.Settings.AllowedEmailDomains.Value
	}
	return l
}
