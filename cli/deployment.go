package cli

import (
	"github.com/spf13/cobra"
)

func newDeploymentCommand(f *Factory) *cobra.Command {
	cmd := group("deployment", "The deployment itself")
	cmd.AddCommand(&cobra.Command{
		Use:   "show",
		Short: "Show the deployment's identifier, public URL, environment and version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			resp, err := c.GetDeploymentWithResponse(cmd.Context())
			if err := check(resp, err); err != nil {
				return err
			}
			d := resp.JSON200
			return f.print(resp.Body, []string{"IDENTIFIER", "PUBLIC URL", "ENVIRONMENT", "VERSION", "DELETION GRACE"}, func() [][]string {
				id := deref(d.Identifier)
				if id == "" {
					id = "(none)"
				}
				return [][]string{{id, d.PublicUrl, string(d.Environment), d.Version, d.DeletionGracePeriod}}
			})
		},
	})
	return cmd
}
