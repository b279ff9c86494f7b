package cli

import (
	"bytes"
	"context"

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
	cmd.Flags().StringVarP(&opts.File, "file", "f", "", `settings document (JSON); "-" reads stdin`)
	cmd.Flags().StringVar(&opts.IfMatch, "if-match", "", `version last read, or "current"`)
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagRequired("if-match")
	return cmd
}

func settingsSetRun(ctx context.Context, opts *settingsSetOptions) error {
	f := opts.f
	body, err := readInput(f, opts.File)
	if err != nil {
		return err
	}
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	tag, err := f.ifMatch(opts.IfMatch, func() (string, error) {
		r, err := c.GetSettingsWithResponse(ctx)
		if err := check(r, err); err != nil {
			return "", err
		}
		return r.HTTPResponse.Header.Get("ETag"), nil
	})
	if err != nil {
		return err
	}
	key := optionalIdempotencyKey(opts.IdempotencyKey)
	p := &client.PutSettingsParams{IfMatch: tag, IdempotencyKey: key}
	r, err := c.PutSettingsWithBodyWithResponse(ctx, p, "application/json", bytes.NewReader(body))
	if err := f.checkKeyed(key, r, err); err != nil {
		return err
	}
	return f.printJSON(r.Body)
}
