package cli

import "testing"

func TestPolicyGetFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdPolicyGet, []flagCase[policyGetOptions]{
		{name: "organization", args: []string{"org_1"}, want: policyGetOptions{OrganizationID: "org_1"}},
		{name: "no organization", args: nil, wantErr: "accepts 1 arg(s), received 0"},
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
		{name: "no organization", args: []string{"-f", "policy.json", "--if-match", "1"}, wantErr: "accepts 1 arg(s), received 0"},
	})
}

func TestPolicyEffectiveFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdPolicyEffective, []flagCase[policyEffectiveOptions]{
		{name: "organization", args: []string{"org_1"}, want: policyEffectiveOptions{OrganizationID: "org_1"}},
		{name: "two organizations", args: []string{"org_1", "org_2"}, wantErr: "accepts 1 arg(s), received 2"},
	})
}
