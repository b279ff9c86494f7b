package cli

import "testing"

func TestOwnerAcceptFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOwnerAccept, []flagCase[ownerAcceptOptions]{
		{name: "token argument", args: []string{"renga_invite_x", "--display-name", "Ada"},
			want: ownerAcceptOptions{InvitationToken: "renga_invite_x", DisplayName: "Ada"}},
		// The run function reads the token from stdin.
		{name: "token on stdin", args: []string{"--display-name", "Ada"}, want: ownerAcceptOptions{DisplayName: "Ada"}},
		{name: "empty token argument", args: []string{"", "--display-name", "Ada"}, wantErr: "give the invitation token as an argument or on stdin"},
		{name: "no display name", args: []string{"renga_invite_x"}, wantErr: `required flag(s) "display-name" not set`},
		{name: "two tokens", args: []string{"a", "b", "--display-name", "Ada"}, wantErr: `unexpected argument "b"`},
	})
}

func TestOwnerMeFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOwnerMe, []flagCase[ownerMeOptions]{
		{name: "no arguments", args: nil, want: ownerMeOptions{}},
		{name: "an argument", args: []string{"usr_1"}, wantErr: `unexpected argument "usr_1"`},
	})
}
