package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// newCmdIntakeKey is `renga owner intake-key`: the organization's intake keys, with which its
// agents register.
func newCmdIntakeKey(f *Factory) *cobra.Command {
	cmd := group("intake-key", "The organization's intake keys (for registering agents)")
	cmd.AddCommand(newCmdIntakeKeyCreate(f, nil), newCmdIntakeKeyList(f, nil), newCmdIntakeKeyRevoke(f, nil),
		newCmdIntakeKeyRotate(f, nil))
	return cmd
}

var intakeKeyHeaders = []string{"ID", "NAME", "IDENTIFIER", "CREATED", "REVOKED"}

func (f *Factory) intakeKeyRow(k client.IntakeKey) []string {
	revoked := ""
	if k.RevokedAt != nil {
		revoked = f.timeCell(*k.RevokedAt)
	}
	return []string{k.Id, k.Name, deref(k.Identifier), f.timeCell(k.CreatedAt), revoked}
}

// printIntakeKeySecret prints a new intake key with its secret (shown once).
func (f *Factory) printIntakeKeySecret(body []byte, k *client.IntakeKeySecret) error {
	return f.print(body, []string{"ID", "NAME", "IDENTIFIER", "KEY"}, func() [][]string {
		return [][]string{{k.Id, k.Name, deref(k.Identifier), k.Key}}
	})
}

type intakeKeyCreateOptions struct {
	f *Factory

	Name           string
	IdempotencyKey string
}

func newCmdIntakeKeyCreate(f *Factory, runF func(*intakeKeyCreateOptions) error) *cobra.Command {
	opts := &intakeKeyCreateOptions{f: f}
	cmd := &cobra.Command{
		Use:   "create --name NAME",
		Short: "Create an intake key and print it (once)",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return intakeKeyCreateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "what the key is for")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send (default: a new one, printed on stderr unless refused)")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func intakeKeyCreateRun(ctx context.Context, opts *intakeKeyCreateOptions) error {
	f := opts.f
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	key := newIdempotencyKey(opts.IdempotencyKey)
	r, err := c.CreateIntakeKeyWithResponse(ctx, &client.CreateIntakeKeyParams{IdempotencyKey: key},
		client.IntakeKeyCreate{Name: opts.Name})
	if err := f.checkKeyedShownOnce(key, r, err); err != nil {
		return err
	}
	return f.printIntakeKeySecret(r.Body, r.JSON201)
}

type intakeKeyListOptions struct {
	f *Factory
}

func newCmdIntakeKeyList(f *Factory, runF func(*intakeKeyListOptions) error) *cobra.Command {
	opts := &intakeKeyListOptions{f: f}
	return &cobra.Command{
		Use:   "list",
		Short: "List intake keys and the deployment identifier new keys carry",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return intakeKeyListRun(cmd.Context(), opts)
		},
	}
}

func intakeKeyListRun(ctx context.Context, opts *intakeKeyListOptions) error {
	f := opts.f
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	r, err := c.ListIntakeKeysWithResponse(ctx, &client.ListIntakeKeysParams{})
	if err := check(r, err); err != nil {
		return err
	}
	if !f.JSON() {
		fmt.Fprintf(f.Stderr, "Deployment identifier: %s\n", orNone(r.JSON200.DeploymentIdentifier))
	}
	return f.print(r.Body, intakeKeyHeaders, func() [][]string {
		var rows [][]string
		for _, k := range r.JSON200.Items {
			rows = append(rows, f.intakeKeyRow(k))
		}
		return rows
	})
}

type intakeKeyRevokeOptions struct {
	f *Factory

	KeyID          string
	IdempotencyKey string
}

func newCmdIntakeKeyRevoke(f *Factory, runF func(*intakeKeyRevokeOptions) error) *cobra.Command {
	opts := &intakeKeyRevokeOptions{f: f}
	cmd := &cobra.Command{
		Use:   "revoke KEY_ID",
		Short: "Revoke an intake key",
		Args:  positional("KEY_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.KeyID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return intakeKeyRevokeRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	return cmd
}

func intakeKeyRevokeRun(ctx context.Context, opts *intakeKeyRevokeOptions) error {
	f := opts.f
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	key := optionalIdempotencyKey(opts.IdempotencyKey)
	p := &client.RevokeIntakeKeyParams{IdempotencyKey: key}
	r, err := c.RevokeIntakeKeyWithResponse(ctx, opts.KeyID, p)
	if err := f.checkKeyed(key, r, err); err != nil {
		return err
	}
	return f.print(r.Body, intakeKeyHeaders, func() [][]string { return [][]string{f.intakeKeyRow(*r.JSON200)} })
}

type intakeKeyRotateOptions struct {
	f *Factory

	KeyID          string
	IdempotencyKey string
}

func newCmdIntakeKeyRotate(f *Factory, runF func(*intakeKeyRotateOptions) error) *cobra.Command {
	opts := &intakeKeyRotateOptions{f: f}
	cmd := &cobra.Command{
		Use:   "rotate KEY_ID",
		Short: "Replace an intake key by a new one carrying the current identifier (printed once)",
		Args:  positional("KEY_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.KeyID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return intakeKeyRotateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send (default: a new one, printed on stderr unless refused)")
	return cmd
}

func intakeKeyRotateRun(ctx context.Context, opts *intakeKeyRotateOptions) error {
	f := opts.f
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	key := newIdempotencyKey(opts.IdempotencyKey)
	r, err := c.RotateIntakeKeyWithResponse(ctx, opts.KeyID, &client.RotateIntakeKeyParams{IdempotencyKey: key})
	if err := f.checkKeyedShownOnce(key, r, err); err != nil {
		return err
	}
	return f.printIntakeKeySecret(r.Body, r.JSON201)
}
