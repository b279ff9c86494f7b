// Package policyfield is the table of a policy document's fields (DESIGN §4.1): each limit,
// locked setting and entitlement with its kind, its range, its built-in default and its
// description. The server's validation and effective view and the Terraform provider's schema
// are built from it; a test holds it to openapi.yaml. Adding a field means adding it to the
// spec and to Fields (and a constant for code that reads it by name).
//
// The package imports nothing beyond the standard library, so that the provider can use it
// without the server's database code.
package policyfield

import "strings"

// Section is one of a policy document's three parts.
type Section string

// The sections of a policy document.
const (
	Limits         Section = "limits"
	LockedSettings Section = "locked_settings"
	Entitlements   Section = "entitlements"
)

// SectionInfo describes a section.
type SectionInfo struct {
	Name Section
	// EffectiveName is the section's name in the effective view (EffectivePolicy), which
	// shows the settings in force rather than the locks.
	EffectiveName string
	Description   string
}

// Sections are the parts of a policy document, in the spec's order.
var Sections = []SectionInfo{
	{Limits, "limits", "Quantitative limits. A limit left out inherits the deployment default (`RENGA_POLICY_DEFAULTS`). Limits bite where the thing happens; lowering one below current use blocks new use and deletes nothing."},
	{LockedSettings, "settings", "Owners' security settings locked to a value: owners cannot change a locked setting (`409 setting_locked`). A setting left out is not locked by this policy."},
	{Entitlements, "entitlements", "Features switched on or off. An entitlement left out inherits the deployment default. Withdrawing `organization_identity_providers` disables the organization's own identity providers and removes what is bound to them."},
}

// Kind is what a field holds.
type Kind int

// Kinds of field, with the Go type a domain document holds for each.
const (
	Integer   Kind = iota + 1 // int64, between Min and Max
	Boolean                   // bool
	StringSet                 // []string; the server keeps it sorted and without duplicates
)

func (k Kind) String() string {
	switch k {
	case Integer:
		return "integer"
	case Boolean:
		return "boolean"
	case StringSet:
		return "set of strings"
	}
	return "unknown"
}

// Path names a field by section and name, e.g. "limits.max_agents": the name in validation
// errors and in the changed fields of the audit log.
type Path string

// Section is the section the field is in.
func (p Path) Section() Section {
	s, _, _ := strings.Cut(string(p), ".")
	return Section(s)
}

// Name is the field's name within its section, e.g. "max_agents".
func (p Path) Name() string {
	_, n, _ := strings.Cut(string(p), ".")
	return n
}

// The fields that code reads by name.
const (
	MaxAgents                     Path = "limits.max_agents"
	MaxUsers                      Path = "limits.max_users"
	IntakeBytesPerDay             Path = "limits.intake_bytes_per_day"
	ObservationRetentionDays      Path = "limits.observation_retention_days"
	MaxJobsPerDay                 Path = "limits.max_jobs_per_day"
	RequireSSO                    Path = "locked_settings.require_sso"
	RequireMFA                    Path = "locked_settings.require_mfa"
	SessionMaxAgeHours            Path = "locked_settings.session_max_age_hours"
	AllowedEmailDomains           Path = "locked_settings.allowed_email_domains"
	OrganizationIdentityProviders Path = "entitlements.organization_identity_providers"
	Jobs                          Path = "entitlements.jobs"
	OwnerExport                   Path = "entitlements.owner_export"
)

// Unbounded is the maximum of an integer the spec gives no maximum: high enough to mean "no
// limit", low enough that adding a day's usage to it cannot overflow an int64.
const Unbounded int64 = 1 << 62

// Strings constrains each string of a StringSet.
type Strings struct {
	MinLength, MaxLength int
	Pattern              string
	// Meaning says what the pattern admits, for error messages ("a lowercase domain name").
	Meaning string
}

// Field is one field of a policy document.
type Field struct {
	Path Path
	Kind Kind
	// Min and Max bound an Integer, inclusive.
	Min, Max int64
	// MaxItems bounds a StringSet's size; Items constrains each of its strings.
	MaxItems int
	Items    Strings
	// Default is the built-in default (int64 or bool) where neither the organization's policy
	// nor RENGA_POLICY_DEFAULTS say; nil for locked settings, which no default locks.
	Default     any
	Description string
}

// emailDomain is the API's EmailDomain.
var emailDomain = Strings{
	MinLength: 1, MaxLength: 253,
	Pattern: `^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`,
	Meaning: "a lowercase domain name, e.g. acme.example",
}

// Fields is the table, in the spec's order within each section.
var Fields = []Field{
	{Path: MaxAgents, Kind: Integer, Min: 0, Max: Unbounded, Default: int64(1000),
		Description: "Most agents the organization may register (checked at agent registration). At least 0."},
	{Path: MaxUsers, Kind: Integer, Min: 1, Max: Unbounded, Default: int64(100),
		Description: "Most users the organization may have (checked when an invitation is accepted). At least 1."},
	{Path: IntakeBytesPerDay, Kind: Integer, Min: 0, Max: Unbounded, Default: int64(10 << 30),
		Description: "Most observation bytes accepted per UTC day; beyond it intake answers `429 limit_exceeded` until the next UTC midnight. At least 0."},
	{Path: ObservationRetentionDays, Kind: Integer, Min: 1, Max: 3650, Default: int64(90),
		Description: "Days observations are kept before the retention job deletes them. 1 to 3650."},
	{Path: MaxJobsPerDay, Kind: Integer, Min: 0, Max: Unbounded, Default: int64(10000),
		Description: "Most jobs owners may create per UTC day. At least 0."},

	{Path: RequireSSO, Kind: Boolean,
		Description: "Lock whether members must sign in through single sign-on."},
	{Path: RequireMFA, Kind: Boolean,
		Description: "Lock whether members must use multi-factor authentication."},
	{Path: SessionMaxAgeHours, Kind: Integer, Min: 1, Max: 720,
		Description: "Lock the longest session, in hours. 1 to 720."},
	{Path: AllowedEmailDomains, Kind: StringSet, MaxItems: 100, Items: emailDomain,
		Description: "Lock the email domains members may have (lowercase domain names, at most 100). The server keeps them sorted and without duplicates."},

	{Path: OrganizationIdentityProviders, Kind: Boolean, Default: true,
		Description: "Whether the organization may configure its own identity providers."},
	{Path: Jobs, Kind: Boolean, Default: true,
		Description: "Whether owners may queue jobs for their agents."},
	{Path: OwnerExport, Kind: Boolean, Default: false,
		Description: "Whether owners may export their organization."},
}

// Lookup finds a field by its path.
func Lookup(p Path) (Field, bool) {
	for _, f := range Fields {
		if f.Path == p {
			return f, true
		}
	}
	return Field{}, false
}

// In lists the fields of a section, in the table's order.
func In(s Section) []Field {
	var out []Field
	for _, f := range Fields {
		if f.Path.Section() == s {
			out = append(out, f)
		}
	}
	return out
}

// SectionOf describes a section.
func SectionOf(s Section) (SectionInfo, bool) {
	for _, info := range Sections {
		if info.Name == s {
			return info, true
		}
	}
	return SectionInfo{}, false
}

// IsSection says whether name is a section of a policy document.
func IsSection(name string) bool {
	for _, s := range Sections {
		if string(s.Name) == name {
			return true
		}
	}
	return false
}
