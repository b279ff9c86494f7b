package cli

import (
	"testing"
	"time"
)

func TestSupportEnableFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdSupportEnable, []flagCase[supportEnableOptions]{
		{name: "emails and domain", args: []string{"--provider", "idp_1", "--email", "a@x.example", "--email", "b@x.example", "--domain", "y.example", "--if-match", "3"},
			want: supportEnableOptions{ProviderID: "idp_1", Emails: []string{"a@x.example", "b@x.example"}, Domain: "y.example", IfMatch: "3"}},
		{name: "nobody named", args: []string{"--provider", "idp_1", "--if-match", "3"}, wantErr: "--email, --domain or both"},
		{name: "no provider", args: []string{"--email", "a@x.example", "--if-match", "3"}, wantErr: `required flag(s) "provider" not set`},
		{name: "an argument", args: []string{"idp_1"}, wantErr: `unexpected argument "idp_1"`},
	})
}

func TestSupportDisableFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdSupportDisable, []flagCase[supportDisableOptions]{
		{name: "if-match", args: []string{"--if-match", "current"}, want: supportDisableOptions{IfMatch: "current"}},
		{name: "no if-match", args: nil, wantErr: `required flag(s) "if-match" not set`},
	})
}

func TestSupportGrantCreateFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdSupportGrantCreate, []flagCase[supportGrantCreateOptions]{
		{name: "duration and email", args: []string{"--expires-in", "4h", "--email", "a@x.example"},
			want: supportGrantCreateOptions{ExpiresIn: 4 * 3600 * 1e9, Email: "a@x.example"}},
		{name: "negative", args: []string{"--expires-in", "-1h"}, wantErr: "--expires-in must be positive"},
		{name: "no duration", args: nil, wantErr: `required flag(s) "expires-in" not set`},
	})
}

func TestSupportGrantRevokeFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdSupportGrantRevoke, []flagCase[supportGrantRevokeOptions]{
		{name: "id", args: []string{"grt_1"}, want: supportGrantRevokeOptions{GrantID: "grt_1"}},
		{name: "no id", args: nil, wantErr: "missing argument GRANT_ID"},
	})
}

func TestIdentityProviderRecoverLocalFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdIdentityProviderRecoverLocal, []flagCase[identityProviderRecoverLocalOptions]{
		{name: "default lifetime", args: []string{"--email", "a@x.example"},
			want: identityProviderRecoverLocalOptions{Email: "a@x.example", ExpiresIn: 15 * time.Minute}},
		{name: "24h", args: []string{"--email", "a@x.example", "--expires-in", "24h"},
			want: identityProviderRecoverLocalOptions{Email: "a@x.example", ExpiresIn: 24 * time.Hour}},
		{name: "over 24h", args: []string{"--email", "a@x.example", "--expires-in", "24h1s"}, wantErr: "at most 24h"},
		{name: "zero", args: []string{"--email", "a@x.example", "--expires-in", "0"}, wantErr: "more than 0"},
		{name: "no email", args: nil, wantErr: `required flag(s) "email" not set`},
		{name: "an argument", args: []string{"a@x.example"}, wantErr: `unexpected argument "a@x.example"`},
	})
}
