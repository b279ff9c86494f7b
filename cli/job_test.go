package cli

import "testing"

func TestJobCreateFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdJobCreate, []flagCase[jobCreateOptions]{
		{name: "installation and command", args: []string{"inst_1", "collect"},
			want: jobCreateOptions{InstallationID: "inst_1", Command: "collect"}},
		{name: "idempotency key", args: []string{"inst_1", "collect", "--idempotency-key", "k"},
			want: jobCreateOptions{InstallationID: "inst_1", Command: "collect", IdempotencyKey: "k"}},
		{name: "no command", args: []string{"inst_1"}, wantErr: "missing argument COMMAND"},
		// A command's own arguments are one argument: quote them.
		{name: "unquoted command arguments", args: []string{"inst_1", "echo", "hi"}, wantErr: `unexpected argument "hi"`},
	})
}

func TestJobListFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdJobList, []flagCase[jobListOptions]{
		{name: "no arguments", args: nil, want: jobListOptions{}},
		{name: "an argument", args: []string{"inst_1"}, wantErr: `unexpected argument "inst_1"`},
	})
}
