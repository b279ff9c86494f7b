package cli

import "testing"

func TestAgentListFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdAgentList, []flagCase[agentListOptions]{
		{name: "no arguments", args: nil, want: agentListOptions{}},
		{name: "an argument", args: []string{"inst_1"}, wantErr: `unknown command "inst_1"`},
	})
}

func TestObservationListFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdObservationList, []flagCase[observationListOptions]{
		{name: "installation", args: []string{"inst_1"}, want: observationListOptions{InstallationID: "inst_1"}},
		{name: "no installation", args: nil, wantErr: "accepts 1 arg(s), received 0"},
		{name: "two installations", args: []string{"inst_1", "inst_2"}, wantErr: "accepts 1 arg(s), received 2"},
	})
}
