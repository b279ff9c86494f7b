package cli

import (
	"net/netip"
	"testing"
	"time"
)

func TestOperatorTokenCreateFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOperatorTokenCreate, []flagCase[operatorTokenCreateOptions]{
		{name: "defaults", args: []string{"--name", "ci", "--scope", "organizations:read"},
			want: operatorTokenCreateOptions{Name: "ci", Scopes: []string{"organizations:read"}, ExpiresIn: 720 * time.Hour}},
		{name: "repeated and comma-separated scopes", args: []string{"--name", "ci", "--scope", "organizations:read,audit:read", "--scope", "policies:write"},
			want: operatorTokenCreateOptions{Name: "ci", Scopes: []string{"organizations:read", "audit:read", "policies:write"}, ExpiresIn: 720 * time.Hour}},
		{name: "never expires, from two sources", args: []string{"--name", "ci", "--scope", "audit:read", "--expires-in", "0",
			"--allow-from", "10.0.0.0/8, 192.0.2.7", "--allow-from", "2001:db8::/32"},
			want: operatorTokenCreateOptions{Name: "ci", Scopes: []string{"audit:read"},
				AllowedSources: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
					netip.MustParsePrefix("2001:db8::/32")}}},
		{name: "a host's bits are masked", args: []string{"--name", "ci", "--scope", "audit:read", "--expires-in", "1h", "--allow-from", "10.1.2.3/8"},
			want: operatorTokenCreateOptions{Name: "ci", Scopes: []string{"audit:read"}, ExpiresIn: time.Hour,
				AllowedSources: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}},
		// Scopes are checked when the token is minted (domain.ErrInvalidToken, exit code 2).
		{name: "unknown scope is the domain's to refuse", args: []string{"--name", "x", "--scope", "everything"},
			want: operatorTokenCreateOptions{Name: "x", Scopes: []string{"everything"}, ExpiresIn: 720 * time.Hour}},
		{name: "no name", args: []string{"--scope", "audit:read"}, wantErr: `required flag(s) "name" not set`},
		{name: "a name with a right-to-left override", args: []string{"--name", "ci\u202eZ", "--scope", "audit:read"},
			wantErr: `--name "ci\u202eZ" holds a control, direction-changing or invisible character`},
		{name: "a name with a byte-order mark", args: []string{"--name", "\ufeffci", "--scope", "audit:read"},
			wantErr: `--name "\ufeffci" holds a control, direction-changing or invisible character`},
		{name: "a name in any script", args: []string{"--name", "Café 東京 🚀", "--scope", "audit:read"},
			want: operatorTokenCreateOptions{Name: "Café 東京 🚀", Scopes: []string{"audit:read"}, ExpiresIn: 720 * time.Hour}},
		{name: "no scope", args: []string{"--name", "ci"}, wantErr: `required flag(s) "scope" not set`},
		{name: "negative lifetime", args: []string{"--name", "ci", "--scope", "audit:read", "--expires-in", "-1h"},
			wantErr: "--expires-in must not be negative"},
		{name: "lifetime not a duration", args: []string{"--name", "ci", "--scope", "audit:read", "--expires-in", "30d"},
			wantErr: `invalid argument "30d" for "--expires-in"`},
		{name: "bad source", args: []string{"--name", "ci", "--scope", "audit:read", "--allow-from", "office"},
			wantErr: `--allow-from "office" is not a CIDR or address`},
		{name: "an argument", args: []string{"ci", "--name", "ci", "--scope", "audit:read"}, wantErr: `unexpected argument "ci"`},
	})
}

func TestOperatorTokenListFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOperatorTokenList, []flagCase[operatorTokenListOptions]{
		{name: "no arguments", args: nil, want: operatorTokenListOptions{}},
		{name: "an argument", args: []string{"tok_1"}, wantErr: `unexpected argument "tok_1"`},
	})
}

func TestOperatorTokenRevokeFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOperatorTokenRevoke, []flagCase[operatorTokenRevokeOptions]{
		{name: "id, asked on a terminal", args: []string{"tok_1"}, terminal: true, want: operatorTokenRevokeOptions{TokenID: "tok_1"}},
		{name: "yes", args: []string{"tok_1", "--yes"}, want: operatorTokenRevokeOptions{TokenID: "tok_1", Yes: true}},
		{name: "no terminal and no yes", args: []string{"tok_1"}, wantErr: "pass --yes to confirm"},
		{name: "no id", args: nil, wantErr: "missing argument TOKEN_ID"},
		{name: "two ids", args: []string{"tok_1", "tok_2"}, wantErr: `unexpected argument "tok_2"`},
	})
}
