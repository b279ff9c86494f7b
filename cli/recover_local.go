package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"renga.dev/renga/server"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
)

// recover-local is RFD 15's escape hatch: a release-only command (no API operation exists
// for it, so no bearer token can reach it) that lets one support person sign in once without
// an identity provider. Like operator-token create, it calls the domain directly on the
// server host, as the local operator.

type identityProviderRecoverLocalOptions struct {
	f *Factory

	Email     string
	ExpiresIn time.Duration
}

func newCmdIdentityProviderRecoverLocal(f *Factory, runF func(*identityProviderRecoverLocalOptions) error) *cobra.Command {
	opts := &identityProviderRecoverLocalOptions{f: f}
	cmd := &cobra.Command{
		Use:   "recover-local --email ADDRESS",
		Short: "Let one support person sign in once without an identity provider (release command)",
		Long: `Make a local recovery sign-in: a one-time code that signs in the support person with this
email at <RENGA_PUBLIC_URL>/signin/recover, without the identity provider, before it expires
(--expires-in, at most 24h). The code is printed once on stdout; only its SHA-256 is stored.
The support source must name the email (the recovery bypasses the identity provider, not the
support source). Until the code is used or expires, the lockout guard counts it as a usable
sign-in method. A newer recovery for the same email revokes the older one.

This is a release command only: it runs on the server host with RENGA_DATABASE_URL, never
against RENGA_URL, and no API operation or operator token can make a recovery. It is audited
as recoverLocal by the local operator.`,
		Args: positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.ExpiresIn <= 0 || opts.ExpiresIn > domain.MaxLocalRecoveryLifetime {
				return usageError("--expires-in must be more than 0 and at most 24h")
			}
			if f.remoteURL() != "" && !f.local {
				return usageError("recover-local is a release command: run it on the server host with RENGA_DATABASE_URL, " +
					"without RENGA_URL or --url (no API operation makes a recovery sign-in)")
			}
			if runF != nil {
				return runF(opts)
			}
			return identityProviderRecoverLocalRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Email, "email", "", "the support person's email (the support source must name it)")
	cmd.Flags().DurationVar(&opts.ExpiresIn, "expires-in", domain.DefaultLocalRecoveryLifetime, "how long the code can be used (at most 24h)")
	_ = cmd.MarkFlagRequired("email")
	return cmd
}

func identityProviderRecoverLocalRun(ctx context.Context, opts *identityProviderRecoverLocalOptions) error {
	f := opts.f
	cfg, err := server.LoadConfig(f.Getenv, server.ModeRelease)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("configuration refused:\n%w", err)}
	}
	pool, err := f.Pool(ctx)
	if err != nil {
		return err
	}
	var rec domain.LocalRecovery
	var code string
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		rec, code, err = domain.RecoverLocal(ctx, tx, opts.Email, opts.ExpiresIn, invocationID)
		return err
	})
	if err != nil {
		auditReleaseFailure(ctx, pool, domain.OperationRecoverLocal, "", func(e *domain.AuditEvent) {
			if email, err := domain.CheckRecoveryEmail(opts.Email); err == nil {
				e.TargetEmail = &email // for whom it was refused; only ever an email address
			}
		})
		var ve *domain.ValidationError
		switch {
		case errors.As(err, &ve):
			return usageError("--%s %s", map[string]string{"email": "email", "expires_in": "expires-in"}[ve.Field], ve.Message)
		case errors.Is(err, domain.ErrNotSupportPerson):
			return usageError("the support source does not name %s, so a recovery could sign nobody in: "+
				"name it first (renga support enable ... --email %s)", opts.Email, opts.Email)
		}
		return err
	}
	url := cfg.PublicURL + server.SignInRecoverPath
	if f.JSON() {
		return writeJSON(f, map[string]any{"id": rec.ID, "email": rec.Email, "expires_at": rec.ExpiresAt.UTC(), "url": url, "code": code})
	}
	fmt.Fprintf(f.Stderr, "Created local recovery %s for %s, usable once until %s.\n"+
		"Sign in at %s with the email and this code. The code is shown once; hand it over now.\n",
		rec.ID, rec.Email, f.timeCell(rec.ExpiresAt), url)
	_, err = fmt.Fprintln(f.Stdout, code)
	return err
}
