package cli

import (
	"context"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// newCmdOrgIdentityProvider is `renga owner identity-provider`: the organization's own identity
// providers (entitlement organization_identity_providers).
func newCmdOrgIdentityProvider(f *Factory) *cobra.Command {
	cmd := group("identity-provider", "The organization's own identity providers (client secrets are never shown)")
	cmd.AddCommand(newCmdOrgIdentityProviderList(f, nil), newCmdOrgIdentityProviderCreate(f, nil),
		newCmdOrgIdentityProviderDisable(f, nil))
	return cmd
}

var orgProviderHeaders = []string{"ID", "SLUG", "ISSUER", "STATE", "REASON", "SECRET"}

func orgProviderRow(p client.OrganizationIdentityProvider) []string {
	secret := "no"
	if p.HasClientSecret {
		secret = "stored"
	}
	return []string{p.Id, p.Slug, p.Issuer, p.State, deref(p.DisabledReason), secret}
}

type orgIdentityProviderListOptions struct {
	f *Factory
}

func newCmdOrgIdentityProviderList(f *Factory, runF func(*orgIdentityProviderListOptions) error) *cobra.Command {
	opts := &orgIdentityProviderListOptions{f: f}
	return &cobra.Command{
		Use:   "list",
		Short: "List the organization's identity providers, enabled and disabled",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return orgIdentityProviderListRun(cmd.Context(), opts)
		},
	}
}

func orgIdentityProviderListRun(ctx context.Context, opts *orgIdentityProviderListOptions) error {
	f := opts.f
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	r, err := c.ListOrganizationIdentityProvidersWithResponse(ctx, &client.ListOrganizationIdentityProvidersParams{})
	if err := check(r, err); err != nil {
		return err
	}
	return f.print(r.Body, orgProviderHeaders, func() [][]string {
		var rows [][]string
		for _, p := range r.JSON200.Items {
			rows = append(rows, orgProviderRow(p))
		}
		return rows
	})
}

type orgIdentityProviderCreateOptions struct {
	f *Factory
	providerCreateFlags
}

func newCmdOrgIdentityProviderCreate(f *Factory, runF func(*orgIdentityProviderCreateOptions) error) *cobra.Command {
	opts := &orgIdentityProviderCreateOptions{f: f}
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Add an OpenID Connect provider of the organization's own (needs the entitlement)",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return orgIdentityProviderCreateRun(cmd.Context(), opts)
		},
	}
	opts.register(cmd, "short name, unique among the organization's enabled providers")
	return cmd
}

func orgIdentityProviderCreateRun(ctx context.Context, opts *orgIdentityProviderCreateOptions) error {
	f := opts.f
	body := client.OrganizationIdentityProviderCreate{Slug: opts.Slug, Protocol: client.ProviderProtocolOidc, Issuer: opts.Issuer,
		DisplayName: opts.DisplayName, ClientId: opts.ClientID}
	var err error
	if body.ClientSecret, body.Scopes, body.AllowedEmailDomains, err = opts.optional(f); err != nil {
		return err
	}
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	key := newIdempotencyKey(opts.IdempotencyKey)
	r, err := c.CreateOrganizationIdentityProviderWithResponse(ctx, &client.CreateOrganizationIdentityProviderParams{IdempotencyKey: key}, body)
	if err := f.checkKeyed(&key, r, err); err != nil {
		return err
	}
	return f.print(r.Body, orgProviderHeaders, func() [][]string { return [][]string{orgProviderRow(*r.JSON201)} })
}

type orgIdentityProviderDisableOptions struct {
	f *Factory

	ProviderID     string
	IdempotencyKey string
}

func newCmdOrgIdentityProviderDisable(f *Factory, runF func(*orgIdentityProviderDisableOptions) error) *cobra.Command {
	opts := &orgIdentityProviderDisableOptions{f: f}
	cmd := &cobra.Command{
		Use:   "disable PROVIDER_ID",
		Short: "Disable one of the organization's providers (it stays listed; its slug is freed)",
		Args:  positional("PROVIDER_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ProviderID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return orgIdentityProviderDisableRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	return cmd
}

func orgIdentityProviderDisableRun(ctx context.Context, opts *orgIdentityProviderDisableOptions) error {
	f := opts.f
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	key := optionalIdempotencyKey(opts.IdempotencyKey)
	r, err := c.DisableOrganizationIdentityProviderWithResponse(ctx, opts.ProviderID, &client.DisableOrganizationIdentityProviderParams{IdempotencyKey: key})
	if err := f.checkKeyed(key, r, err); err != nil {
		return err
	}
	return f.print(r.Body, orgProviderHeaders, func() [][]string { return [][]string{orgProviderRow(*r.JSON200)} })
}
