package cli

import (
	"testing"
	"time"
)

func TestAuditListFlags(t *testing.T) {
	t.Parallel()
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	until := time.Date(2026, 2, 1, 0, 0, 0, 0, time.FixedZone("", 3600))
	testFlags(t, newCmdAuditList, []flagCase[auditListOptions]{
		{name: "no flags", args: nil, want: auditListOptions{}},
		{name: "every filter", args: []string{"--organization", "org_1", "--actor", "local-operator", "--operation", "createOrganization",
			"--outcome", "denied", "--since", "2026-01-02T03:04:05Z", "--until", "2026-02-01T00:00:00+01:00",
			"--page-size", "10", "--page-token", "tok"},
			want: auditListOptions{OrganizationID: "org_1", ActorID: "local-operator", Operation: "createOrganization", Outcome: "denied",
				Since: &since, Until: &until, PageSize: 10, PageToken: "tok"}},
		{name: "a duration ago", args: []string{"--since", "24h"}, check: func(t *testing.T, got *auditListOptions) {
			want := time.Now().Add(-24 * time.Hour)
			if got.Since == nil || got.Since.Sub(want).Abs() > time.Minute || got.Until != nil {
				t.Errorf("since %v, until %v; want about %v and none", got.Since, got.Until, want)
			}
		}},
		{name: "bad since", args: []string{"--since", "yesterday"}, wantErr: `--since: parsing time "yesterday"`},
		{name: "a date is not a time", args: []string{"--until", "2026-01-01"}, wantErr: "--until: parsing time"},
		{name: "bad page size", args: []string{"--page-size", "many"}, wantErr: `invalid argument "many" for "--page-size"`},
		{name: "an argument", args: []string{"org_1"}, wantErr: `unexpected argument "org_1"`},
	})
}
