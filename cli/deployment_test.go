package cli

import "testing"

func TestDeploymentShowFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdDeploymentShow, []flagCase[deploymentShowOptions]{
		{name: "no arguments", args: nil, want: deploymentShowOptions{}},
		{name: "an argument", args: []string{"eu-1"}, wantErr: `unexpected argument "eu-1"`},
		{name: "unknown flag", args: []string{"--all"}, wantErr: "unknown flag: --all"},
	})
}
