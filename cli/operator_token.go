package cli

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
)

// newCmdOperatorToken is `renga operator-token`. Minting and listing operator tokens are
// release-only: the API never returns a credential. They call domain functions directly and
// audit as the local operator, like the API would.
func newCmdOperatorToken(f *Factory) *cobra.Command {
	cmd := group("operator-token", "Mint, list and revoke operator tokens (release commands)")
	cmd.AddCommand(newCmdOperatorTokenCreate(f, nil), newCmdOperatorTokenList(f, nil), newCmdOperatorTokenRevoke(f, nil))
	return cmd
}

// invocationID identifies this run of the command in the audit log.
var invocationID = server.NewInvocationID()

type operatorTokenCreateOptions struct {
	f *Factory

	Name           string
	Scopes         []string
	ExpiresIn      time.Duration
	AllowedSources []netip.Prefix
}

func newCmdOperatorTokenCreate(f *Factory, runF func(*operatorTokenCreateOptions) error) *cobra.Command {
	opts := &operatorTokenCreateOptions{f: f}
	var allowFrom []string
	cmd := &cobra.Command{
		Use:   "create --name NAME --scope SCOPE...",
		Short: "Mint an operator token and print it once",
		Long: "Mint an operator token. The token is printed once on stdout and never stored: only its SHA-256 is.\n\nScopes: " +
			strings.Join(domain.Scopes, ", ") + ". A write scope includes its read scope.",
		Args: positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.ExpiresIn < 0 {
				return usageError("--expires-in must not be negative")
			}
			if err := readableTokenName(opts.Name); err != nil {
				return err
			}
			for _, s := range allowFrom {
				p, err := server.ParsePrefix(strings.TrimSpace(s))
				if err != nil {
					return usageError("--allow-from %q is not a CIDR or address", s)
				}
				opts.AllowedSources = append(opts.AllowedSources, p)
			}
			if runF != nil {
				return runF(opts)
			}
			return operatorTokenCreateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "what the token is for (recorded in the audit log)")
	cmd.Flags().StringSliceVar(&opts.Scopes, "scope", nil, "a scope to grant (repeatable or comma-separated)")
	cmd.Flags().DurationVar(&opts.ExpiresIn, "expires-in", 720*time.Hour, "lifetime; 0 means it never expires")
	cmd.Flags().StringSliceVar(&allowFrom, "allow-from", nil, "CIDR the token may be used from (repeatable; default any)")
	_ = cmd.MarkFlagRequired("name")
	_ = cmd.MarkFlagRequired("scope")
	return cmd
}

// readableTokenName refuses a name that openapi.yaml's OperatorToken.name does not describe: its
// pattern for names people read (no control, direction-changing or invisible character), as the
// API refuses such names where it takes them.
func readableTokenName(name string) error {
	spec, err := api.GetSpec()
	if err != nil {
		return err
	}
	if spec.Components.Schemas["OperatorToken"].Value.Properties["name"].Value.VisitJSON(name) != nil {
		return usageError("--name %q holds a control, direction-changing or invisible character", name)
	}
	return nil
}

func operatorTokenCreateRun(ctx context.Context, opts *operatorTokenCreateOptions) error {
	f := opts.f
	n := domain.NewToken{Name: opts.Name, Scopes: opts.Scopes, AllowedSources: opts.AllowedSources}
	if opts.ExpiresIn > 0 {
		e := time.Now().Add(opts.ExpiresIn)
		n.ExpiresAt = &e
	}
	pool, err := f.Pool(ctx)
	if err != nil {
		return err
	}
	var t domain.Token
	var secret string
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		t, secret, err = domain.CreateToken(ctx, tx, n)
		if err != nil {
			return err
		}
		return domain.RecordAudit(ctx, tx, domain.ReleaseAudit(invocationID, "createOperatorToken", t.ID, domain.OutcomeSucceeded,
			[]string{"name", "scopes", "expires_at", "allowed_sources"}))
	})
	if err != nil {
		auditReleaseFailure(ctx, pool, "createOperatorToken", "")
		if errors.Is(err, domain.ErrInvalidToken) {
			return usageError("%v", err)
		}
		return err
	}
	if f.JSON() {
		return writeJSON(f, map[string]string{"id": t.ID, "token": secret})
	}
	fmt.Fprintf(f.Stderr, "Created %s (%s). The token is shown once; store it now.\n", t.ID, t.Name)
	_, err = fmt.Fprintln(f.Stdout, secret)
	return err
}

// operatorTokenRow is an operator token as the release commands print it (never its secret).
type operatorTokenRow struct {
	ID             string     `json:"id"`
	Name           string     `json:"name"`
	Scopes         []string   `json:"scopes"`
	AllowedSources []string   `json:"allowed_sources"`
	CreatedAt      time.Time  `json:"created_at"`
	ExpiresAt      *time.Time `json:"expires_at"`
	RevokedAt      *time.Time `json:"revoked_at"`
}

func toOperatorTokenRow(t domain.Token) operatorTokenRow {
	r := operatorTokenRow{ID: t.ID, Name: t.Name, Scopes: t.Scopes, AllowedSources: []string{}, CreatedAt: t.CreatedAt.UTC(),
		ExpiresAt: t.ExpiresAt, RevokedAt: t.RevokedAt}
	for _, p := range t.AllowedSources {
		r.AllowedSources = append(r.AllowedSources, p.String())
	}
	return r
}

type operatorTokenListOptions struct {
	f *Factory
}

func newCmdOperatorTokenList(f *Factory, runF func(*operatorTokenListOptions) error) *cobra.Command {
	opts := &operatorTokenListOptions{f: f}
	return &cobra.Command{
		Use:   "list",
		Short: "List operator tokens (never their secrets)",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return operatorTokenListRun(cmd.Context(), opts)
		},
	}
}

func operatorTokenListRun(ctx context.Context, opts *operatorTokenListOptions) error {
	f := opts.f
	pool, err := f.Pool(ctx)
	if err != nil {
		return err
	}
	tokens, err := domain.ListTokens(ctx, pool)
	if err != nil {
		return err
	}
	rows := make([]operatorTokenRow, 0, len(tokens))
	for _, t := range tokens {
		rows = append(rows, toOperatorTokenRow(t))
	}
	if f.JSON() {
		return writeJSON(f, map[string]any{"items": rows})
	}
	var table [][]string
	for _, r := range rows {
		state := "active"
		switch {
		case r.RevokedAt != nil:
			state = "revoked"
		case r.ExpiresAt != nil && r.ExpiresAt.Before(time.Now()):
			state = "expired"
		}
		expires := "never"
		if r.ExpiresAt != nil {
			expires = f.timeCell(*r.ExpiresAt)
		}
		table = append(table, []string{r.ID, r.Name, state, strings.Join(r.Scopes, ","), expires, strings.Join(r.AllowedSources, ",")})
	}
	return f.printTable([]string{"ID", "NAME", "STATE", "SCOPES", "EXPIRES", "ALLOWED FROM"}, table)
}

type operatorTokenRevokeOptions struct {
	f *Factory

	TokenID string
	Yes     bool
}

func newCmdOperatorTokenRevoke(f *Factory, runF func(*operatorTokenRevokeOptions) error) *cobra.Command {
	opts := &operatorTokenRevokeOptions{f: f}
	cmd := &cobra.Command{
		Use:   "revoke TOKEN_ID",
		Short: "Revoke an operator token at once (revoking a revoked token succeeds)",
		Long: `Revoke an operator token at once: whatever uses it is refused from its next request.
On a terminal it asks first; elsewhere it needs --yes.`,
		Args: positional("TOKEN_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.TokenID = args[0]
			if err := f.needConfirmation(opts.Yes, "revoking "+opts.TokenID); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return operatorTokenRevokeRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Yes, "yes", false, "revoke without asking")
	return cmd
}

func operatorTokenRevokeRun(ctx context.Context, opts *operatorTokenRevokeOptions) error {
	f := opts.f
	pool, err := f.Pool(ctx)
	if err != nil {
		return err
	}
	if !opts.Yes {
		t, err := domain.TokenByID(ctx, pool, opts.TokenID)
		if errors.Is(err, db.ErrNotFound) {
			return fmt.Errorf("no operator token %s", opts.TokenID)
		}
		if err != nil {
			return err
		}
		if err := f.confirmYes(fmt.Sprintf("Revoke operator token %s (%s)? Whatever uses it is refused from its next request.", t.ID, t.Name)); err != nil {
			return err
		}
	}
	var t domain.Token
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		t, err = domain.RevokeToken(ctx, tx, opts.TokenID)
		if err != nil {
			return err
		}
		return domain.RecordAudit(ctx, tx, domain.ReleaseAudit(invocationID, "revokeOperatorToken", t.ID, domain.OutcomeSucceeded,
			[]string{"revoked_at"}))
	})
	if err != nil {
		auditReleaseFailure(ctx, pool, "revokeOperatorToken", opts.TokenID)
		if errors.Is(err, db.ErrNotFound) {
			return fmt.Errorf("no operator token %s", opts.TokenID)
		}
		return err
	}
	if f.JSON() {
		return writeJSON(f, toOperatorTokenRow(t))
	}
	fmt.Fprintf(f.Stderr, "Revoked %s (%s).\n", t.ID, t.Name)
	return nil
}

// auditReleaseFailure records a failed release-only command, like a failed API attempt; target,
// if given, adds what else the event concerns.
func auditReleaseFailure(ctx context.Context, pool *pgxpool.Pool, operation, tokenID string, target ...func(*domain.AuditEvent)) {
	e := domain.ReleaseAudit(invocationID, operation, tokenID, domain.OutcomeFailed, nil)
	for _, t := range target {
		t(&e)
	}
	_ = domain.RecordAudit(context.WithoutCancel(ctx), pool, e)
}
