package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// newCmdSettings is `renga owner settings`: the organization's security settings.
func newCmdSettings(f *Factory) *cobra.Command {
	cmd := group("settings", "Your organization's security settings")
	cmd.AddCommand(newCmdSettingsGet(f, nil), newCmdSettingsSet(f, nil))
	return cmd
}

type settingsGetOptions struct {
	f *Factory
}

func newCmdSettingsGet(f *Factory, runF func(*settingsGetOptions) error) *cobra.Command {
	opts := &settingsGetOptions{f: f}
	return &cobra.Command{
		Use:   "get",
		Short: "Print the settings and what the policy locks",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return settingsGetRun(cmd.Context(), opts)
		},
	}
}

func settingsGetRun(ctx context.Context, opts *settingsGetOptions) error {
	c, err := opts.f.OwnerClient(true)
	if err != nil {
		return err
	}
	r, err := c.GetSettingsWithResponse(ctx)
	if err := check(r, err); err != nil {
		return err
	}
	return opts.f.printJSON(r.Body)
}

type settingsSetOptions struct {
	f *Factory

	File           string
	IfMatch        string
	IdempotencyKey string
}

func newCmdSettingsSet(f *Factory, runF func(*settingsSetOptions) error) *cobra.Command {
	opts := &settingsSetOptions{f: f}
	cmd := &cobra.Command{
		Use:   "set -f settings.json --if-match VERSION",
		Short: "Replace the settings (locked ones can only keep their locked value)",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return settingsSetRun(cmd.Context(), opts)
		},
	}
	opts.document().register(cmd, `settings document (JSON); "-" reads stdin`, `version last read, or "current"`)
	return cmd
}

func (o *settingsSetOptions) document() documentFlags {
	return documentFlags{File: &o.File, IfMatch: &o.IfMatch, IdempotencyKey: &o.IdempotencyKey}
}

func settingsSetRun(ctx context.Context, opts *settingsSetOptions) error {
	f := opts.f
	r, err := putDocument(ctx, f, opts.document(),
		func() (*client.ClientWithResponses, error) { return f.OwnerClient(true) },
		func(ctx context.Context, c *client.ClientWithResponses) (*client.GetSettingsResponse, error) {
			return c.GetSettingsWithResponse(ctx)
		},
		func(ctx context.Context, c *client.ClientWithResponses, tag string, key *string, body io.Reader) (*client.PutSettingsResponse, error) {
			p := &client.PutSettingsParams{IfMatch: tag, IdempotencyKey: key}
			return c.PutSettingsWithBodyWithResponse(ctx, p, "application/json", body)
		})
	if err != nil {
		return err
	}
	return f.printJSON(r.Body)
}
