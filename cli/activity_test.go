package cli

import "testing"

func TestActivityListFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdActivityList, []flagCase[activityListOptions]{
		{name: "no arguments", args: nil, want: activityListOptions{}},
		{name: "an argument", args: []string{"org_1"}, wantErr: `unexpected argument "org_1"`},
	})
}
