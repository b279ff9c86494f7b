package cli

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

type activityListOptions struct {
	f *Factory
}

// newCmdActivityList is `renga owner activity`.
func newCmdActivityList(f *Factory, runF func(*activityListOptions) error) *cobra.Command {
	opts := &activityListOptions{f: f}
	return &cobra.Command{
		Use:   "activity",
		Short: "Your organization's Activity, newest first (including the operators' changes)",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return activityListRun(cmd.Context(), opts)
		},
	}
}

func activityListRun(ctx context.Context, opts *activityListOptions) error {
	f := opts.f
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	r, err := c.ListActivityWithResponse(ctx, &client.ListActivityParams{})
	if err := check(r, err); err != nil {
		return err
	}
	return f.print(r.Body, []string{"TIME", "ACTOR", "OPERATION", "CHANGED"}, func() [][]string {
		var rows [][]string
		for _, a := range r.JSON200.Items {
			rows = append(rows, []string{f.timeCell(a.Time), string(a.Actor.Type) + " " + a.Actor.NameSnapshot + " (" + a.Actor.Id + ")",
				a.Operation, strings.Join(a.ChangedFields, ",")})
		}
		return rows
	})
}
