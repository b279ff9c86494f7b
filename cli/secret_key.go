package cli

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"renga.dev/renga/server"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
)

// newCmdSecretKey is `renga secret-key`: the deployment's RENGA_SECRET_KEY (release commands).
func newCmdSecretKey(f *Factory) *cobra.Command {
	cmd := group("secret-key", "The key that seals stored secrets (release commands)")
	cmd.AddCommand(newCmdSecretKeyRotate(f, nil))
	return cmd
}

type secretKeyRotateOptions struct {
	f *Factory
}

func newCmdSecretKeyRotate(f *Factory, runF func(*secretKeyRotateOptions) error) *cobra.Command {
	opts := &secretKeyRotateOptions{f: f}
	return &cobra.Command{
		Use:   "rotate",
		Short: "Re-seal every stored secret under RENGA_SECRET_KEY",
		Long: `Re-seal every stored secret (identity providers' client secrets) under the current
RENGA_SECRET_KEY. To rotate: set the new key as RENGA_SECRET_KEY and the old one in
RENGA_SECRET_KEY_PREVIOUS on every server process and restart them (both keys open, the new one
seals), run this command on the server host, then remove RENGA_SECRET_KEY_PREVIOUS.`,
		Args: positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return secretKeyRotateRun(cmd.Context(), opts)
		},
	}
}

func secretKeyRotateRun(ctx context.Context, opts *secretKeyRotateOptions) error {
	f := opts.f
	cfg, err := server.LoadConfig(f.Getenv, server.ModeRelease)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("configuration refused:\n%w", err)}
	}
	if cfg.Secrets == nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("RENGA_SECRET_KEY is not set: it is the key to re-seal under")}
	}
	pool, err := f.Pool(ctx)
	if err != nil {
		return err
	}
	var n int
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if n, err = domain.ResealProviderSecrets(ctx, tx, cfg.Secrets); err != nil {
			return err
		}
		return domain.RecordAudit(ctx, tx, domain.ReleaseAudit(invocationID, "rotateSecretKey", "", domain.OutcomeSucceeded,
			[]string{"client_secret"}))
	})
	if err != nil {
		auditReleaseFailure(ctx, pool, "rotateSecretKey", "")
		return err
	}
	_, err = fmt.Fprintf(f.Stderr, "Re-sealed %d secret(s) under the current RENGA_SECRET_KEY.\n", n)
	return err
}
