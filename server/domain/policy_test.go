package domain

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"renga.dev/renga/server/domain/policyfield"
)

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		name      string
		doc       PolicyDocument
		field     string // "" for valid
		msgSuffix string
	}{
		{"empty", PolicyDocument{}, "", ""},
		{"nil", nil, "", ""},
		{"built-in defaults", BuiltinDefaults, "", ""},
		{"at the bounds", PolicyDocument{policyfield.MaxUsers: int64(1), policyfield.ObservationRetentionDays: int64(3650),
			policyfield.MaxAgents: policyfield.Unbounded, policyfield.SessionMaxAgeHours: int64(720)}, "", ""},
		{"every kind", PolicyDocument{policyfield.RequireSSO: true, policyfield.AllowedEmailDomains: []string{"acme.example"},
			policyfield.Jobs: false}, "", ""},
		{"below the minimum", PolicyDocument{policyfield.MaxUsers: int64(0)}, "limits.max_users", "between 1 and 4611686018427387904"},
		{"negative", PolicyDocument{policyfield.MaxAgents: int64(-1)}, "limits.max_agents", "between 0 and 4611686018427387904"},
		{"above the maximum", PolicyDocument{policyfield.ObservationRetentionDays: int64(3651)}, "limits.observation_retention_days", "between 1 and 3650"},
		{"above Unbounded", PolicyDocument{policyfield.IntakeBytesPerDay: policyfield.Unbounded + 1}, "limits.intake_bytes_per_day", "between 0 and 4611686018427387904"},
		{"locked setting out of range", PolicyDocument{policyfield.SessionMaxAgeHours: int64(721)}, "locked_settings.session_max_age_hours", "between 1 and 720"},
		{"first in the table's order", PolicyDocument{policyfield.SessionMaxAgeHours: int64(0), policyfield.MaxJobsPerDay: int64(-1)},
			"limits.max_jobs_per_day", "between 0 and 4611686018427387904"},
		{"wrong Go type", PolicyDocument{policyfield.MaxAgents: 5}, "limits.max_agents", "must be a integer"},
		{"wrong kind", PolicyDocument{policyfield.Jobs: int64(1)}, "entitlements.jobs", "must be a boolean"},
		{"unknown field", PolicyDocument{"limits.max_cars": int64(1)}, "limits.max_cars", "not a field of a policy document"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.doc.Validate()
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate() = %v, want a ValidationError", err)
			}
			if ve.Field != c.field || !strings.HasSuffix(ve.Message, c.msgSuffix) {
				t.Errorf("Validate() = %q %q, want %q ...%q", ve.Field, ve.Message, c.field, c.msgSuffix)
			}
		})
	}
}

func TestParsePolicyDefaults(t *testing.T) {
	with := func(changes PolicyDocument) PolicyDocument {
		d := PolicyDocument{}
		for k, v := range BuiltinDefaults {
			d[k] = v
		}
		for k, v := range changes {
			d[k] = v
		}
		return d
	}
	for _, c := range []struct {
		name, in string
		want     PolicyDocument
		err      string // a part of the error, "" for none
	}{
		{"unset", "", BuiltinDefaults, ""},
		{"empty object", "{}", BuiltinDefaults, ""},
		{"null", "null", BuiltinDefaults, ""},
		{"one limit", `{"limits": {"max_users": 5}}`, with(PolicyDocument{policyfield.MaxUsers: int64(5)}), ""},
		{"all three parts", `{"limits": {"max_agents": 7}, "locked_settings": {"require_mfa": true, "allowed_email_domains": ["b.example", "a.example"]},
			"entitlements": {"owner_export": true, "jobs": null}}`,
			with(PolicyDocument{policyfield.MaxAgents: int64(7), policyfield.RequireMFA: true, policyfield.OwnerExport: true,
				policyfield.AllowedEmailDomains: []string{"b.example", "a.example"}}), ""},
		{"null section", `{"limits": null}`, BuiltinDefaults, ""},
		{"bad JSON", `{"limits": {"max_users": 5}`, nil, "not a policy document: unexpected EOF"},
		{"not an object", `[1, 2]`, nil, "not a policy document: json: cannot unmarshal array"},
		{"unknown section", `{"quotas": {}}`, nil, `not a policy document: unknown section "quotas"`},
		{"unknown field", `{"limits": {"max_cars": 5}}`, nil, `unknown field "limits.max_cars"`},
		{"unknown locked setting", `{"locked_settings": {"require_passkeys": true}}`, nil, `unknown field "locked_settings.require_passkeys"`},
		{"unknown entitlement", `{"entitlements": {"teleport": true}}`, nil, `unknown field "entitlements.teleport"`},
		{"wrong type", `{"limits": {"max_users": "many"}}`, nil, "limits.max_users: json: cannot unmarshal string"},
		{"not an integer", `{"limits": {"max_users": 5.5}}`, nil, "limits.max_users: json: cannot unmarshal number 5.5"},
		{"section not an object", `{"limits": 5}`, nil, "limits: json: cannot unmarshal number"},
		{"out of range", `{"limits": {"max_users": 0}}`, nil, "limits.max_users must be between 1 and"},
		{"trailing data", `{} {}`, nil, "not a policy document: trailing data"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParsePolicyDefaults(c.in)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("ParsePolicyDefaults(%s) = %v, want an error with %q", c.in, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePolicyDefaults(%s): %v", c.in, err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("ParsePolicyDefaults(%s) = %v, want %v", c.in, got, c.want)
			}
		})
	}
	// Parsing must not change the built-in defaults it starts from.
	if _, err := ParsePolicyDefaults(`{"limits": {"max_agents": 1}}`); err != nil || BuiltinDefaults[policyfield.MaxAgents] != int64(1000) {
		t.Errorf("BuiltinDefaults changed: %v (%v)", BuiltinDefaults, err)
	}
}

func TestPolicyDocumentJSON(t *testing.T) {
	for _, c := range []struct {
		name string
		doc  PolicyDocument
		json string
	}{
		{"empty", PolicyDocument{}, `{"entitlements":{},"limits":{},"locked_settings":{}}`},
		{"nil", nil, `{"entitlements":{},"limits":{},"locked_settings":{}}`},
		{"one of each", PolicyDocument{policyfield.MaxAgents: int64(500), policyfield.RequireSSO: true,
			policyfield.AllowedEmailDomains: []string{}, policyfield.OwnerExport: false},
			`{"entitlements":{"owner_export":false},"limits":{"max_agents":500},"locked_settings":{"allowed_email_domains":[],"require_sso":true}}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			raw, err := json.Marshal(c.doc)
			if err != nil || string(raw) != c.json {
				t.Fatalf("Marshal = %s, %v; want %s", raw, err, c.json)
			}
			var back PolicyDocument
			if err := json.Unmarshal(raw, &back); err != nil {
				t.Fatal(err)
			}
			if len(back) != len(c.doc) || (len(c.doc) > 0 && !reflect.DeepEqual(back, c.doc)) {
				t.Errorf("round trip = %v, want %v", back, c.doc)
			}
		})
	}
	// What the API sends (with its ignored version) and nulls read leniently.
	var doc PolicyDocument
	if err := json.Unmarshal([]byte(`{"limits": {"max_users": 3, "max_agents": null}, "version": 4, "extra": {}}`), &doc); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(doc, PolicyDocument{policyfield.MaxUsers: int64(3)}) {
		t.Errorf("lenient read = %v", doc)
	}
}

func TestChangedPolicyFields(t *testing.T) {
	for _, c := range []struct {
		name string
		a, b PolicyDocument
		want []string
	}{
		{"both empty", PolicyDocument{}, PolicyDocument{}, nil},
		{"same", PolicyDocument{policyfield.MaxAgents: int64(5), policyfield.AllowedEmailDomains: []string{"a.example"}},
			PolicyDocument{policyfield.MaxAgents: int64(5), policyfield.AllowedEmailDomains: []string{"a.example"}}, nil},
		{"set", PolicyDocument{}, PolicyDocument{policyfield.MaxAgents: int64(5)}, []string{"limits.max_agents"}},
		{"unset", PolicyDocument{policyfield.Jobs: false}, PolicyDocument{}, []string{"entitlements.jobs"}},
		{"changed value", PolicyDocument{policyfield.RequireSSO: true}, PolicyDocument{policyfield.RequireSSO: false},
			[]string{"locked_settings.require_sso"}},
		{"set changed", PolicyDocument{policyfield.AllowedEmailDomains: []string{"a.example"}},
			PolicyDocument{policyfield.AllowedEmailDomains: []string{"a.example", "b.example"}}, []string{"locked_settings.allowed_email_domains"}},
		{"sorted by name", PolicyDocument{policyfield.MaxUsers: int64(1), policyfield.OwnerExport: true},
			PolicyDocument{policyfield.MaxAgents: int64(1), policyfield.SessionMaxAgeHours: int64(2)},
			[]string{"entitlements.owner_export", "limits.max_agents", "limits.max_users", "locked_settings.session_max_age_hours"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := changedPolicyFields(c.a, c.b); !slices.Equal(got, c.want) {
				t.Errorf("changedPolicyFields = %v, want %v", got, c.want)
			}
		})
	}
}

func TestEffective(t *testing.T) {
	defaults := PolicyDocument{policyfield.MaxAgents: int64(7), policyfield.MaxUsers: int64(100), policyfield.Jobs: true,
		policyfield.RequireMFA: true}
	owner := Settings{RequireSSO: true, RequireMFA: false, SessionMaxAgeHours: 8, AllowedEmailDomains: nil}
	for _, c := range []struct {
		name     string
		policy   PolicyDocument
		defaults PolicyDocument
		want     map[policyfield.Path]Sourced // a subset of the view
	}{
		{"deployment defaults", PolicyDocument{}, defaults, map[policyfield.Path]Sourced{
			policyfield.MaxAgents: {int64(7), SourceDeployment}, policyfield.Jobs: {true, SourceDeployment},
		}},
		{"organization over deployment", PolicyDocument{policyfield.MaxAgents: int64(9), policyfield.Jobs: false}, defaults,
			map[policyfield.Path]Sourced{policyfield.MaxAgents: {int64(9), SourceOrganization}, policyfield.Jobs: {false, SourceOrganization},
				policyfield.MaxUsers: {int64(100), SourceDeployment}}},
		{"zero where neither says", PolicyDocument{}, PolicyDocument{}, map[policyfield.Path]Sourced{
			policyfield.MaxJobsPerDay: {int64(0), SourceDeployment}, policyfield.OwnerExport: {false, SourceDeployment},
		}},
		{"owners' settings where nothing locks", PolicyDocument{}, PolicyDocument{}, map[policyfield.Path]Sourced{
			policyfield.RequireSSO: {true, SourceOwner}, policyfield.SessionMaxAgeHours: {int64(8), SourceOwner},
			policyfield.AllowedEmailDomains: {[]string{}, SourceOwner},
		}},
		{"deployment locks", PolicyDocument{}, defaults, map[policyfield.Path]Sourced{
			policyfield.RequireMFA: {true, SourceDeployment}, policyfield.RequireSSO: {true, SourceOwner},
		}},
		{"organization locks over deployment locks", PolicyDocument{policyfield.RequireMFA: false,
			policyfield.AllowedEmailDomains: []string{"acme.example"}}, defaults, map[policyfield.Path]Sourced{
			policyfield.RequireMFA:          {false, SourceOrganization},
			policyfield.AllowedEmailDomains: {[]string{"acme.example"}, SourceOrganization},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := Effective(c.policy, c.defaults, owner)
			if len(e) != len(policyfield.Fields) {
				t.Errorf("the view has %d fields, the table %d", len(e), len(policyfield.Fields))
			}
			for path, want := range c.want {
				if got := e[path]; !reflect.DeepEqual(got, want) {
					t.Errorf("%s = %#v, want %#v", path, got, want)
				}
			}
			for _, f := range policyfield.Fields {
				if f.Path.Section() == policyfield.Limits {
					if got, want := Limit(c.policy, c.defaults, f.Path), e[f.Path].Value; got != want {
						t.Errorf("Limit(%s) = %d, Effective says %v", f.Path, got, want)
					}
				}
				if f.Path.Section() == policyfield.Entitlements {
					if got, want := Entitled(c.policy, c.defaults, f.Path), e[f.Path].Value; got != want {
						t.Errorf("Entitled(%s) = %v, Effective says %v", f.Path, got, want)
					}
				}
			}
		})
	}
}

func TestEffectiveJSON(t *testing.T) {
	e := Effective(PolicyDocument{policyfield.MaxAgents: int64(3)}, BuiltinDefaults, DefaultSettings())
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]Sourced
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		section, name string
		want          string
	}{
		{"limits", "max_agents", `{"value":3,"source":"organization"}`},
		{"limits", "max_users", `{"value":100,"source":"deployment"}`},
		{"entitlements", "owner_export", `{"value":false,"source":"deployment"}`},
		{"settings", "session_max_age_hours", `{"value":24,"source":"owner"}`},
		{"settings", "allowed_email_domains", `{"value":[],"source":"owner"}`},
	} {
		v, _ := json.Marshal(got[c.section][c.name])
		if string(v) != c.want {
			t.Errorf("%s.%s = %s, want %s", c.section, c.name, v, c.want)
		}
	}
	if len(got) != 3 || len(got["limits"])+len(got["settings"])+len(got["entitlements"]) != len(policyfield.Fields) {
		t.Errorf("effective JSON = %s", raw)
	}
}

func TestLocks(t *testing.T) {
	owner := DefaultSettings()
	for _, c := range []struct {
		name             string
		policy, defaults PolicyDocument
		want             PolicyDocument
	}{
		{"nothing locked", PolicyDocument{policyfield.MaxAgents: int64(1)}, BuiltinDefaults, PolicyDocument{}},
		{"by the organization", PolicyDocument{policyfield.RequireSSO: false, policyfield.AllowedEmailDomains: []string{"a.example"}},
			BuiltinDefaults, PolicyDocument{policyfield.RequireSSO: false, policyfield.AllowedEmailDomains: []string{"a.example"}}},
		{"by the deployment", PolicyDocument{}, PolicyDocument{policyfield.SessionMaxAgeHours: int64(4)},
			PolicyDocument{policyfield.SessionMaxAgeHours: int64(4)}},
		{"both", PolicyDocument{policyfield.RequireMFA: true}, PolicyDocument{policyfield.RequireMFA: false, policyfield.RequireSSO: true},
			PolicyDocument{policyfield.RequireMFA: true, policyfield.RequireSSO: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Effective(c.policy, c.defaults, owner).Locks(); !reflect.DeepEqual(got, c.want) {
				t.Errorf("Locks() = %v, want %v", got, c.want)
			}
		})
	}
}

func TestSettingsAgainstLocks(t *testing.T) {
	yes, no, hours := true, false, int64(12)
	domains := []string{"b.example", "a.example", "a.example"}
	locks := PolicyDocument{policyfield.RequireSSO: true, policyfield.SessionMaxAgeHours: int64(12),
		policyfield.AllowedEmailDomains: []string{"a.example", "b.example"}}
	for _, c := range []struct {
		name string
		w    SettingsWrite
		want string
	}{
		{"nothing written", SettingsWrite{}, ""},
		{"the locked values", SettingsWrite{RequireSSO: &yes, SessionMaxAgeHours: &hours, AllowedEmailDomains: &domains}, ""},
		{"an unlocked setting", SettingsWrite{RequireMFA: &no}, ""},
		{"another value", SettingsWrite{RequireSSO: &no}, "require_sso"},
		{"another set", SettingsWrite{AllowedEmailDomains: &[]string{"a.example"}}, "allowed_email_domains"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := lockedSetting(c.w, locks); got != c.want {
				t.Errorf("lockedSetting = %q, want %q", got, c.want)
			}
		})
	}
	// Every locked setting is an owners' setting, so that Effective can fall back on it.
	for _, f := range policyfield.In(policyfield.LockedSettings) {
		if _, ok := DefaultSettings().byField()[f.Path]; !ok {
			t.Errorf("%s has no owners' setting", f.Path)
		}
	}
	a := Settings{RequireSSO: true, SessionMaxAgeHours: 24, AllowedEmailDomains: []string{"a.example"}}
	b := Settings{RequireMFA: true, SessionMaxAgeHours: 8, AllowedEmailDomains: []string{"a.example"}}
	if got := changedSettings(a, b); !slices.Equal(got, []string{"require_sso", "require_mfa", "session_max_age_hours"}) {
		t.Errorf("changedSettings = %v", got)
	}
}

// TestSettingsApplied: each locked setting shows its locked value, the others the owners'; every
// locked setting of the table is applied (a field added to the table and not to Applied fails).
func TestSettingsApplied(t *testing.T) {
	owners := Settings{RequireMFA: true, SessionMaxAgeHours: 24, AllowedEmailDomains: []string{"c.example"}}
	got := owners.Applied(PolicyDocument{policyfield.RequireSSO: true, policyfield.SessionMaxAgeHours: int64(12)})
	if want := (Settings{RequireSSO: true, RequireMFA: true, SessionMaxAgeHours: 12, AllowedEmailDomains: []string{"c.example"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("Applied = %+v, want %+v", got, want)
	}
	if got := owners.Applied(PolicyDocument{}); !reflect.DeepEqual(got, owners) {
		t.Errorf("Applied without locks = %+v, want the owners' %+v", got, owners)
	}
	// A lock of each setting to a value unlike the owners' shows that value.
	other := map[policyfield.Kind]any{policyfield.Boolean: true, policyfield.Integer: int64(7), policyfield.StringSet: []string{"b.example", "a.example"}}
	for _, f := range policyfield.In(policyfield.LockedSettings) {
		v := other[f.Kind]
		got := DefaultSettings().Applied(PolicyDocument{f.Path: v}).byField()[f.Path]
		if !sameValue(got, v) {
			t.Errorf("%s locked to %v shows %v", f.Path, v, got)
		}
	}
}
