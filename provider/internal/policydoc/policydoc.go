// Package policydoc maps an organization policy document (DESIGN §4.1) between the API's
// shape and Terraform values. Every field is optional: null means "not set by this document"
// (a limit or entitlement inherits the deployment default, a setting is not locked).
package policydoc

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"renga.dev/renga/gen/client"
)

// Limits are the quantitative limits.
type Limits struct {
	MaxAgents                types.Int64 `tfsdk:"max_agents"`
	MaxUsers                 types.Int64 `tfsdk:"max_users"`
	IntakeBytesPerDay        types.Int64 `tfsdk:"intake_bytes_per_day"`
	ObservationRetentionDays types.Int64 `tfsdk:"observation_retention_days"`
	MaxJobsPerDay            types.Int64 `tfsdk:"max_jobs_per_day"`
}

// LockedSettings are the owners' settings the document locks.
type LockedSettings struct {
	RequireSSO          types.Bool  `tfsdk:"require_sso"`
	RequireMFA          types.Bool  `tfsdk:"require_mfa"`
	SessionMaxAgeHours  types.Int64 `tfsdk:"session_max_age_hours"`
	AllowedEmailDomains types.Set   `tfsdk:"allowed_email_domains"`
}

// Entitlements switch features on or off.
type Entitlements struct {
	OrganizationIdentityProviders types.Bool `tfsdk:"organization_identity_providers"`
	Jobs                          types.Bool `tfsdk:"jobs"`
	OwnerExport                   types.Bool `tfsdk:"owner_export"`
}

// Document is the three parts of a policy document.
type Document struct {
	Limits         *Limits
	LockedSettings *LockedSettings
	Entitlements   *Entitlements
}

// Descriptions of each attribute, shared by the resource and the data sources.
var Descriptions = map[string]string{
	"limits":                          "Quantitative limits. A limit left out inherits the deployment default (`RENGA_POLICY_DEFAULTS`). Limits bite where the thing happens; lowering one below current use blocks new use and deletes nothing.",
	"max_agents":                      "Most agents the organization may register (checked at agent registration). At least 0.",
	"max_users":                       "Most users the organization may have (checked when an invitation is accepted). At least 1.",
	"intake_bytes_per_day":            "Most observation bytes accepted per UTC day; beyond it intake answers `429 limit_exceeded` until the next UTC midnight. At least 0.",
	"observation_retention_days":      "Days observations are kept before the retention job deletes them. 1 to 3650.",
	"max_jobs_per_day":                "Most jobs owners may create per UTC day. At least 0.",
	"locked_settings":                 "Owners' security settings locked to a value: owners cannot change a locked setting (`409 setting_locked`). A setting left out is not locked by this policy.",
	"require_sso":                     "Lock whether members must sign in through single sign-on.",
	"require_mfa":                     "Lock whether members must use multi-factor authentication.",
	"session_max_age_hours":           "Lock the longest session, in hours. 1 to 720.",
	"allowed_email_domains":           "Lock the email domains members may have (lowercase domain names, at most 100). The server keeps them sorted and without duplicates.",
	"entitlements":                    "Features switched on or off. An entitlement left out inherits the deployment default. Withdrawing `organization_identity_providers` disables the organization's own identity providers and removes what is bound to them.",
	"organization_identity_providers": "Whether the organization may configure its own identity providers.",
	"jobs":                            "Whether owners may queue jobs for their agents.",
	"owner_export":                    "Whether owners may export their organization.",
}

func int64Value(p *int64) types.Int64 {
	if p == nil {
		return types.Int64Null()
	}
	return types.Int64Value(*p)
}

func boolValue(p *bool) types.Bool {
	if p == nil {
		return types.BoolNull()
	}
	return types.BoolValue(*p)
}

func int64Ptr(v types.Int64) *int64 {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	x := v.ValueInt64()
	return &x
}

func boolPtr(v types.Bool) *bool {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	x := v.ValueBool()
	return &x
}

// FromAPI converts what the server holds. A part the server holds empty is null, unless prior
// (the configuration or state it replaces) had it as an empty object: then it stays an empty
// object, so `limits = {}` does not turn into a diff.
func FromAPI(ctx context.Context, limits client.PolicyLimits, locked client.LockedSettings, ent client.Entitlements, prior Document) (Document, diag.Diagnostics) {
	var diags diag.Diagnostics
	var d Document
	if limits != (client.PolicyLimits{}) || prior.Limits != nil {
		d.Limits = &Limits{
			MaxAgents:                int64Value(limits.MaxAgents),
			MaxUsers:                 int64Value(limits.MaxUsers),
			IntakeBytesPerDay:        int64Value(limits.IntakeBytesPerDay),
			ObservationRetentionDays: int64Value(limits.ObservationRetentionDays),
			MaxJobsPerDay:            int64Value(limits.MaxJobsPerDay),
		}
	}
	if locked.RequireSso != nil || locked.RequireMfa != nil || locked.SessionMaxAgeHours != nil || locked.AllowedEmailDomains != nil || prior.LockedSettings != nil {
		domains := types.SetNull(types.StringType)
		if locked.AllowedEmailDomains != nil {
			elems := make([]attr.Value, 0, len(*locked.AllowedEmailDomains))
			for _, s := range *locked.AllowedEmailDomains {
				elems = append(elems, types.StringValue(s))
			}
			var ds diag.Diagnostics
			domains, ds = types.SetValue(types.StringType, elems)
			diags.Append(ds...)
		}
		d.LockedSettings = &LockedSettings{
			RequireSSO:          boolValue(locked.RequireSso),
			RequireMFA:          boolValue(locked.RequireMfa),
			SessionMaxAgeHours:  int64Value(locked.SessionMaxAgeHours),
			AllowedEmailDomains: domains,
		}
	}
	if ent != (client.Entitlements{}) || prior.Entitlements != nil {
		d.Entitlements = &Entitlements{
			OrganizationIdentityProviders: boolValue(ent.OrganizationIdentityProviders),
			Jobs:                          boolValue(ent.Jobs),
			OwnerExport:                   boolValue(ent.OwnerExport),
		}
	}
	return d, diags
}

// ToAPI is the body of a PUT that replaces the policy with d.
func (d Document) ToAPI(ctx context.Context) (client.PolicyWrite, diag.Diagnostics) {
	var diags diag.Diagnostics
	var w client.PolicyWrite
	if l := d.Limits; l != nil {
		w.Limits = &client.PolicyLimits{
			MaxAgents:                int64Ptr(l.MaxAgents),
			MaxUsers:                 int64Ptr(l.MaxUsers),
			IntakeBytesPerDay:        int64Ptr(l.IntakeBytesPerDay),
			ObservationRetentionDays: int64Ptr(l.ObservationRetentionDays),
			MaxJobsPerDay:            int64Ptr(l.MaxJobsPerDay),
		}
	}
	if s := d.LockedSettings; s != nil {
		w.LockedSettings = &client.LockedSettings{
			RequireSso:         boolPtr(s.RequireSSO),
			RequireMfa:         boolPtr(s.RequireMFA),
			SessionMaxAgeHours: int64Ptr(s.SessionMaxAgeHours),
		}
		if !s.AllowedEmailDomains.IsNull() && !s.AllowedEmailDomains.IsUnknown() {
			domains := []string{}
			diags.Append(s.AllowedEmailDomains.ElementsAs(ctx, &domains, false)...)
			w.LockedSettings.AllowedEmailDomains = &domains
		}
	}
	if e := d.Entitlements; e != nil {
		w.Entitlements = &client.Entitlements{
			OrganizationIdentityProviders: boolPtr(e.OrganizationIdentityProviders),
			Jobs:                          boolPtr(e.Jobs),
			OwnerExport:                   boolPtr(e.OwnerExport),
		}
	}
	return w, diags
}

// Empty reports whether a stored document sets nothing.
func Empty(p client.Policy) bool {
	l, s, e := p.Limits, p.LockedSettings, p.Entitlements
	return l == (client.PolicyLimits{}) && e == (client.Entitlements{}) &&
		s.RequireSso == nil && s.RequireMfa == nil && s.SessionMaxAgeHours == nil && s.AllowedEmailDomains == nil
}
