package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// newCmdToken is `renga token`: the calling token's own operations (RENGA_OPERATOR_TOKEN);
// minting is `renga operator-token`.
func newCmdToken(f *Factory) *cobra.Command {
	cmd := group("token", "The operator token this command uses")
	cmd.AddCommand(newCmdTokenShow(f, nil), newCmdTokenRevokeSelf(f, nil))
	return cmd
}

type tokenShowOptions struct {
	f *Factory
}

func newCmdTokenShow(f *Factory, runF func(*tokenShowOptions) error) *cobra.Command {
	opts := &tokenShowOptions{f: f}
	return &cobra.Command{
		Use:   "show",
		Short: "Describe the calling token",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return tokenShowRun(cmd.Context(), opts)
		},
	}
}

func tokenShowRun(ctx context.Context, opts *tokenShowOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	resp, err := c.GetTokenSelfWithResponse(ctx)
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
}

type tokenRevokeSelfOptions struct {
	f *Factory

	IdempotencyKey string
}

func newCmdTokenRevokeSelf(f *Factory, runF func(*tokenRevokeSelfOptions) error) *cobra.Command {
	opts := &tokenRevokeSelfOptions{f: f}
	cmd := &cobra.Command{
		Use:   "revoke-self",
		Short: "Revoke the calling token; it stops working at once",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return tokenRevokeSelfRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	return cmd
}

func tokenRevokeSelfRun(ctx context.Context, opts *tokenRevokeSelfOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	key := optionalIdempotencyKey(opts.IdempotencyKey)
	params := &client.RevokeTokenSelfParams{IdempotencyKey: key}
	resp, err := c.RevokeTokenSelfWithResponse(ctx, params)
	// No Idempotency-Key hint: once the token is revoked, no rerun with it can authenticate.
	if err := check(resp, err); err != nil {
		return err
	}
	if f.JSON() {
		return writeJSON(f, map[string]bool{"revoked": true})
	}
	_, err = fmt.Fprintln(f.Stderr, "Revoked the calling token.")
	return err
}
