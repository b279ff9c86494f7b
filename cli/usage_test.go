package cli

import (
	"testing"
	"time"

	openapi_types "github.com/oapi-codegen/runtime/types"
)

func day(s string) openapi_types.Date {
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		panic(err)
	}
	return openapi_types.Date{Time: t}
}

func TestUsageFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdUsage, []flagCase[usageOptions]{
		{name: "one organization", args: []string{"org_1", "--from", "2026-01-01", "--to", "2026-01-03"},
			want: usageOptions{OrganizationID: "org_1", From: day("2026-01-01"), To: day("2026-01-03")}},
		{name: "every organization", args: []string{"--from", "2026-01-01", "--to", "2026-01-03"},
			want: usageOptions{From: day("2026-01-01"), To: day("2026-01-03")}},
		{name: "from defaults to 29 days before to", args: []string{"--to", "2026-03-30"},
			want: usageOptions{From: day("2026-03-01"), To: day("2026-03-30")}},
		{name: "to defaults to today", args: []string{"org_1"}, check: func(t *testing.T, got *usageOptions) {
			today := time.Now().UTC().Truncate(24 * time.Hour)
			if got.OrganizationID != "org_1" || !got.To.Equal(today) || !got.From.Equal(today.AddDate(0, 0, -29)) {
				t.Errorf("got %+v, want org_1 from %s to %s", got, today.AddDate(0, 0, -29), today)
			}
		}},
		// The server refuses a reversed range; the command sends it as given.
		{name: "reversed range", args: []string{"--from", "2026-02-01", "--to", "2025-01-01"},
			want: usageOptions{From: day("2026-02-01"), To: day("2025-01-01")}},
		{name: "bad from", args: []string{"--from", "01/02/2026"}, wantErr: "--from must be YYYY-MM-DD"},
		{name: "bad to", args: []string{"--to", "2026-13-01"}, wantErr: "--to must be YYYY-MM-DD"},
		{name: "empty organization", args: []string{""}, wantErr: "ORGANIZATION_ID is empty"},
		{name: "two organizations", args: []string{"org_1", "org_2"}, wantErr: `unexpected argument "org_2"`},
	})
}
