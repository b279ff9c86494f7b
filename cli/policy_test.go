package cli

import (
	"reflect"
	"testing"
)

func TestPolicyGetFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdPolicyGet, []flagCase[policyGetOptions]{
		{name: "organization", args: []string{"org_1"}, want: policyGetOptions{OrganizationID: "org_1"}},
		{name: "no organization", args: nil, wantErr: "missing argument ORGANIZATION_ID"},
	})
}

func TestPolicySetFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdPolicySet, []flagCase[policySetOptions]{
		{name: "file and version", args: []string{"org_1", "-f", "policy.json", "--if-match", "1"},
			want: policySetOptions{OrganizationID: "org_1", File: "policy.json", IfMatch: "1"}},
		{name: "stdin, current and key", args: []string{"org_1", "--file", "-", "--if-match", "current", "--idempotency-key", "k"},
			want: policySetOptions{OrganizationID: "org_1", File: "-", IfMatch: "current", IdempotencyKey: "k"}},
		{name: "no file", args: []string{"org_1", "--if-match", "1"}, wantErr: `required flag(s) "file" not set`},
		{name: "no if-match", args: []string{"org_1", "-f", "policy.json"}, wantErr: `required flag(s) "if-match" not set`},
		{name: "no organization", args: []string{"-f", "policy.json", "--if-match", "1"}, wantErr: "missing argument ORGANIZATION_ID"},
	})
}

func TestPolicyEffectiveFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdPolicyEffective, []flagCase[policyEffectiveOptions]{
		{name: "organization", args: []string{"org_1"}, want: policyEffectiveOptions{OrganizationID: "org_1"}},
		{name: "two organizations", args: []string{"org_1", "org_2"}, wantErr: `unexpected argument "org_2"`},
	})
}

func TestEffectivePolicyRows(t *testing.T) {
	t.Parallel()
	body := []byte(`{"organization_id": "org_1",
		"limits": {"max_agents": {"value": 500, "source": "organization"}, "max_users": {"value": 100, "source": "deployment"},
			"intake_bytes_per_day": {"value": 10737418240, "source": "deployment"},
			"observation_retention_days": {"value": 90, "source": "deployment"}, "max_jobs_per_day": {"value": 7, "source": "organization"}},
		"entitlements": {"organization_identity_providers": {"value": true, "source": "deployment"},
			"jobs": {"value": false, "source": "organization"}, "owner_export": {"value": false, "source": "deployment"}},
		"settings": {"require_sso": {"value": true, "source": "organization"}, "require_mfa": {"value": false, "source": "owner"},
			"session_max_age_hours": {"value": 24, "source": "owner"},
			"allowed_email_domains": {"value": ["a.example", "b.example"], "source": "deployment"}}}`)
	got, err := effectivePolicyRows(body)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"limits.max_agents", "500", "organization"},
		{"limits.max_users", "100", "deployment"},
		{"limits.intake_bytes_per_day", "10737418240", "deployment"},
		{"limits.observation_retention_days", "90", "deployment"},
		{"limits.max_jobs_per_day", "7", "organization"},
		{"entitlements.organization_identity_providers", "true", "deployment"},
		{"entitlements.jobs", "false", "organization"},
		{"entitlements.owner_export", "false", "deployment"},
		{"settings.require_sso", "true", "organization"},
		{"settings.require_mfa", "false", "owner"},
		{"settings.session_max_age_hours", "24", "owner"},
		{"settings.allowed_email_domains", "a.example,b.example", "deployment"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows:\n got %q\nwant %q", got, want)
	}
	if _, err := effectivePolicyRows([]byte(`{"settings": {"allowed_email_domains": {"value": 3}}}`)); err == nil {
		t.Error("a set that is not a list of strings was printed")
	}
}
