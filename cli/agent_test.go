package cli

import "testing"

func TestAgentListFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdAgentList, []flagCase[agentListOptions]{
		{name: "no arguments", args: nil, want: agentListOptions{}},
		{name: "an argument", args: []string{"inst_1"}, wantErr: `unexpected argument "inst_1"`},
	})
}

func TestObservationListFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdObservationList, []flagCase[observationListOptions]{
		{name: "installation", args: []string{"inst_1"}, want: observationListOptions{InstallationID: "inst_1"}},
		{name: "no installation", args: nil, wantErr: "missing argument INSTALLATION_ID"},
		{name: "two installations", args: []string{"inst_1", "inst_2"}, wantErr: `unexpected argument "inst_2"`},
	})
}
