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
	"renga.dev/renga/server/domain/policyfield"
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

// Descriptions of each attribute, by section or field name, shared by the resource and the
// data sources: the table of policy fields' descriptions.
var Descriptions = func() map[string]string {
	d := map[string]string{}
	for _, s := range policyfield.Sections {
		d[string(s.Name)] = s.Description
	}
	for _, f := range policyfield.Fields {
		d[f.Path.Name()] = f.Description
	}
	return d
}()

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
