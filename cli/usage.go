package cli

import (
	"context"
	"fmt"
	"time"

	openapi_types "github.com/oapi-codegen/runtime/types"
	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

type usageOptions struct {
	f *Factory

	// OrganizationID is empty for the totals of every organization.
	OrganizationID string
	From, To       openapi_types.Date
}

// newCmdUsage is `renga usage`: an organization's daily usage, or totals per organization.
func newCmdUsage(f *Factory, runF func(*usageOptions) error) *cobra.Command {
	opts := &usageOptions{f: f}
	var from, to string
	cmd := &cobra.Command{
		Use:   "usage [ORGANIZATION_ID] --from DATE --to DATE",
		Short: "Usage: an organization's daily rows, or totals per organization",
		Long: `With an organization ID, its daily usage from --from to --to (UTC days, inclusive); without,
the totals of every organization with usage in the range. Dates are YYYY-MM-DD; --to defaults to
today and --from to 29 days before --to.`,
		Args: positional("[ORGANIZATION_ID]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if args[0] == "" {
					return usageError("ORGANIZATION_ID is empty; leave it out for the totals of every organization")
				}
				opts.OrganizationID = args[0]
			}
			var err error
			if opts.From, opts.To, err = dateRange(from, to); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return usageRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "first UTC day (YYYY-MM-DD)")
	cmd.Flags().StringVar(&to, "to", "", "last UTC day (YYYY-MM-DD)")
	return cmd
}

// dateRange is the --from and --to days: --to defaults to today (UTC), --from to 29 days
// before --to.
func dateRange(from, to string) (openapi_types.Date, openapi_types.Date, error) {
	t := time.Now().UTC().Truncate(24 * time.Hour)
	if to != "" {
		var err error
		if t, err = time.Parse(time.DateOnly, to); err != nil {
			return openapi_types.Date{}, openapi_types.Date{}, usageError("--to must be YYYY-MM-DD")
		}
	}
	f := t.AddDate(0, 0, -29)
	if from != "" {
		var err error
		if f, err = time.Parse(time.DateOnly, from); err != nil {
			return openapi_types.Date{}, openapi_types.Date{}, usageError("--from must be YYYY-MM-DD")
		}
	}
	return openapi_types.Date{Time: f}, openapi_types.Date{Time: t}, nil
}

func usageRun(ctx context.Context, opts *usageOptions) error {
	c, err := opts.f.Client(ctx)
	if err != nil {
		return err
	}
	if opts.OrganizationID != "" {
		return usageOrganizationRun(ctx, opts, c)
	}
	r, err := c.ListUsageWithResponse(ctx, &client.ListUsageParams{From: opts.From, To: opts.To})
	if err := check(r, err); err != nil {
		return err
	}
	return opts.f.print(r.Body, []string{"ORGANIZATION", "INTAKE REQUESTS", "INTAKE BYTES", "JOBS", "TERMINAL MINUTES"}, func() [][]string {
		var rows [][]string
		for _, t := range r.JSON200.Items {
			rows = append(rows, []string{t.OrganizationId, fmt.Sprint(t.IntakeRequests), fmt.Sprint(t.IntakeBytes),
				fmt.Sprint(t.JobsCreated), fmt.Sprint(t.TerminalMinutes)})
		}
		return rows
	})
}

// usageOrganizationRun prints one organization's daily usage.
func usageOrganizationRun(ctx context.Context, opts *usageOptions, c *client.ClientWithResponses) error {
	r, err := c.GetOrganizationUsageWithResponse(ctx, opts.OrganizationID, &client.GetOrganizationUsageParams{From: opts.From, To: opts.To})
	if err := check(r, err); err != nil {
		return err
	}
	return opts.f.print(r.Body, []string{"DAY", "INTAKE REQUESTS", "INTAKE BYTES", "JOBS", "TERMINAL MINUTES"}, func() [][]string {
		var rows [][]string
		for _, d := range r.JSON200.Days {
			rows = append(rows, []string{d.Day.String(), fmt.Sprint(d.IntakeRequests), fmt.Sprint(d.IntakeBytes),
				fmt.Sprint(d.JobsCreated), fmt.Sprint(d.TerminalMinutes)})
		}
		return rows
	})
}
