package cli

import (
	"context"

	"github.com/spf13/cobra"
)

// newCmdDeployment is `renga deployment`: the deployment itself.
func newCmdDeployment(f *Factory) *cobra.Command {
	cmd := group("deployment", "The deployment itself")
	cmd.AddCommand(newCmdDeploymentShow(f, nil))
	return cmd
}

type deploymentShowOptions struct {
	f *Factory
}

func newCmdDeploymentShow(f *Factory, runF func(*deploymentShowOptions) error) *cobra.Command {
	opts := &deploymentShowOptions{f: f}
	return &cobra.Command{
		Use:   "show",
		Short: "Show the deployment's identifier, public URL, environment and version",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return deploymentShowRun(cmd.Context(), opts)
		},
	}
}

func deploymentShowRun(ctx context.Context, opts *deploymentShowOptions) error {
	c, err := opts.f.Client(ctx)
	if err != nil {
		return err
	}
	resp, err := c.GetDeploymentWithResponse(ctx)
	if err := check(resp, err); err != nil {
		return err
	}
	d := resp.JSON200
	return opts.f.print(resp.Body, []string{"IDENTIFIER", "PUBLIC URL", "ENVIRONMENT", "VERSION", "DELETION GRACE"}, func() [][]string {
		return [][]string{{orNone(d.Identifier), d.PublicUrl, string(d.Environment), d.Version, d.DeletionGracePeriod}}
	})
}
