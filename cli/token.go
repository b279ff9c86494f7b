package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// The calling token's own operations (RENGA_OPERATOR_TOKEN); minting is `operator-token`.
func newTokenCommand(f *Factory) *cobra.Command {
	cmd := group("token", "The operator token this command uses")
	cmd.AddCommand(&cobra.Command{
		Use:   "show",
		Short: "Describe the calling token",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			resp, err := c.GetTokenSelfWithResponse(cmd.Context())
			if err := check(resp, err); err != nil {
				return err
			}
			t := resp.JSON200
			return f.print(resp.Body, []string{"ID", "NAME", "SCOPES", "EXPIRES", "ALLOWED FROM"}, func() [][]string {
				scopes := make([]string, len(t.Scopes))
				for i, s := range t.Scopes {
					scopes[i] = string(s)
				}
				expires := "never"
				if t.ExpiresAt != nil {
					expires = f.timeCell(*t.ExpiresAt)
				}
				return [][]string{{t.Id, t.Name, strings.Join(scopes, ","), expires, strings.Join(t.AllowedSources, ",")}}
			})
		},
	})
	var key string
	revoke := &cobra.Command{
		Use:   "revoke-self",
		Short: "Revoke the calling token; it stops working at once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			params := &client.RevokeTokenSelfParams{}
			if key != "" {
				params.IdempotencyKey = &key
				f.reportKey(key)
			}
			resp, err := c.RevokeTokenSelfWithResponse(cmd.Context(), params)
			if err := check(resp, err); err != nil {
				return err
			}
			if f.JSON() {
				return writeJSON(f, map[string]bool{"revoked": true})
			}
			_, err = fmt.Fprintln(f.Stderr, "Revoked the calling token.")
			return err
		},
	}
	revoke.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key to send")
	cmd.AddCommand(revoke)
	return cmd
}
