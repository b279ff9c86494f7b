package cli

import "testing"

func TestIntakeKeyCreateFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdIntakeKeyCreate, []flagCase[intakeKeyCreateOptions]{
		{name: "name", args: []string{"--name", "laptops"}, want: intakeKeyCreateOptions{Name: "laptops"}},
		{name: "idempotency key", args: []string{"--name", "laptops", "--idempotency-key", "k"},
			want: intakeKeyCreateOptions{Name: "laptops", IdempotencyKey: "k"}},
		{name: "no name", args: nil, wantErr: `required flag(s) "name" not set`},
		{name: "name as an argument", args: []string{"laptops"}, wantErr: `unexpected argument "laptops"`},
	})
}

func TestIntakeKeyListFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdIntakeKeyList, []flagCase[intakeKeyListOptions]{
		{name: "no arguments", args: nil, want: intakeKeyListOptions{}},
		{name: "an argument", args: []string{"ik_1"}, wantErr: `unexpected argument "ik_1"`},
	})
}

func TestIntakeKeyRevokeFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdIntakeKeyRevoke, []flagCase[intakeKeyRevokeOptions]{
		{name: "id", args: []string{"ik_1"}, want: intakeKeyRevokeOptions{KeyID: "ik_1"}},
		{name: "idempotency key", args: []string{"ik_1", "--idempotency-key", "k"}, want: intakeKeyRevokeOptions{KeyID: "ik_1", IdempotencyKey: "k"}},
		{name: "no id", args: nil, wantErr: "missing argument KEY_ID"},
	})
}

func TestIntakeKeyRotateFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdIntakeKeyRotate, []flagCase[intakeKeyRotateOptions]{
		{name: "id", args: []string{"ik_1"}, want: intakeKeyRotateOptions{KeyID: "ik_1"}},
		{name: "idempotency key", args: []string{"ik_1", "--idempotency-key", "k"}, want: intakeKeyRotateOptions{KeyID: "ik_1", IdempotencyKey: "k"}},
		{name: "two ids", args: []string{"ik_1", "ik_2"}, wantErr: `unexpected argument "ik_2"`},
	})
}

func TestOrgIdentityProviderFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOrgIdentityProviderCreate, []flagCase[orgIdentityProviderCreateOptions]{
		{name: "required", args: []string{"--slug", "acme", "--issuer", "https://id.example", "--display-name", "Acme", "--client-id", "c"},
			want: orgIdentityProviderCreateOptions{providerCreateFlags: providerCreateFlags{Slug: "acme", Issuer: "https://id.example", DisplayName: "Acme", ClientID: "c"}}},
		{name: "no slug", args: []string{"--issuer", "https://id.example", "--display-name", "Acme", "--client-id", "c"}, wantErr: `required flag(s) "slug" not set`},
	})
	testFlags(t, newCmdOrgIdentityProviderDisable, []flagCase[orgIdentityProviderDisableOptions]{
		{name: "id", args: []string{"oip_1"}, want: orgIdentityProviderDisableOptions{ProviderID: "oip_1"}},
		{name: "no id", args: nil, wantErr: "missing argument PROVIDER_ID"},
	})
}
