package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// newCmdIdentityProvider is `renga identity-provider`: the deployment's identity providers
// (sign-in for the operator's support people). Client secrets are read from a file or stdin,
// never from a flag's value (which the process list and shell history would keep).
func newCmdIdentityProvider(f *Factory) *cobra.Command {
	cmd := group("identity-provider", "Deployment identity providers")
	cmd.Aliases = []string{"idp"}
	cmd.AddCommand(newCmdIdentityProviderList(f, nil), newCmdIdentityProviderGet(f, nil), newCmdIdentityProviderCreate(f, nil),
		newCmdIdentityProviderSet(f, nil), newCmdIdentityProviderDisable(f, nil), newCmdIdentityProviderDelete(f, nil),
		newCmdIdentityProviderTest(f, nil), newCmdIdentityProviderRecoverLocal(f, nil))
	return cmd
}

var identityProviderHeaders = []string{"ID", "SLUG", "SOURCE", "STATE", "ISSUER", "ACTIVE", "PENDING"}

func revisionCell(r *int64) string {
	if r == nil {
		return "-"
	}
	return strconv.FormatInt(*r, 10)
}

func (f *Factory) identityProviderRow(p client.IdentityProvider) []string {
	return []string{p.Id, p.Slug, string(p.Source), string(p.State), p.Issuer, revisionCell(p.ActiveRevision), revisionCell(p.PendingRevision)}
}

func (f *Factory) printIdentityProvider(body []byte, p *client.IdentityProvider) error {
	return f.print(body, identityProviderHeaders, func() [][]string { return [][]string{f.identityProviderRow(*p)} })
}

type identityProviderListOptions struct {
	f *Factory
}

func newCmdIdentityProviderList(f *Factory, runF func(*identityProviderListOptions) error) *cobra.Command {
	opts := &identityProviderListOptions{f: f}
	return &cobra.Command{
		Use:   "list",
		Short: "List the deployment's identity providers, by slug",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return identityProviderListRun(cmd.Context(), opts)
		},
	}
}

func identityProviderListRun(ctx context.Context, opts *identityProviderListOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	var items []client.IdentityProvider
	p := &client.ListIdentityProvidersParams{}
	for {
		r, err := c.ListIdentityProvidersWithResponse(ctx, p)
		if err := check(r, err); err != nil {
			return err
		}
		items = append(items, r.JSON200.Items...)
		if r.JSON200.NextPageToken == nil {
			break
		}
		p.PageToken = r.JSON200.NextPageToken
	}
	if f.JSON() {
		return writeJSON(f, client.IdentityProviderList{Items: items})
	}
	var rows [][]string
	for _, p := range items {
		rows = append(rows, f.identityProviderRow(p))
	}
	return f.printTable(identityProviderHeaders, rows)
}

type identityProviderGetOptions struct {
	f *Factory

	ProviderID string
}

func newCmdIdentityProviderGet(f *Factory, runF func(*identityProviderGetOptions) error) *cobra.Command {
	opts := &identityProviderGetOptions{f: f}
	return &cobra.Command{
		Use:   "get PROVIDER_ID",
		Short: "Show a provider (never its client secret)",
		Args:  positional("PROVIDER_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ProviderID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return identityProviderGetRun(cmd.Context(), opts)
		},
	}
}

func identityProviderGetRun(ctx context.Context, opts *identityProviderGetOptions) error {
	c, err := opts.f.Client(ctx)
	if err != nil {
		return err
	}
	r, err := c.GetIdentityProviderWithResponse(ctx, opts.ProviderID)
	if err := check(r, err); err != nil {
		return err
	}
	return opts.f.printIdentityProvider(r.Body, r.JSON200)
}

type identityProviderCreateOptions struct {
	f *Factory
	providerCreateFlags
}

// providerCreateFlags are a new OpenID Connect provider's flags, the deployment's
// (identity-provider create) and an organization's (owner identity-provider create) alike.
type providerCreateFlags struct {
	Slug                string
	Issuer              string
	DisplayName         string
	ClientID            string
	ClientSecretFile    string
	Scopes              []string
	AllowedEmailDomains []string
	IdempotencyKey      string
}

func (p *providerCreateFlags) register(cmd *cobra.Command, slug string) {
	cmd.Flags().StringVar(&p.Slug, "slug", "", slug)
	cmd.Flags().StringVar(&p.Issuer, "issuer", "", "OpenID issuer URL (immutable)")
	cmd.Flags().StringVar(&p.DisplayName, "display-name", "", "name shown at sign-in")
	cmd.Flags().StringVar(&p.ClientID, "client-id", "", "OAuth client ID")
	cmd.Flags().StringVar(&p.ClientSecretFile, "client-secret-file", "", `file holding the client secret ("-" reads stdin)`)
	cmd.Flags().StringSliceVar(&p.Scopes, "scope", nil, "scope to request (repeatable; default openid, email, profile)")
	cmd.Flags().StringSliceVar(&p.AllowedEmailDomains, "allowed-email-domain", nil, "email domain allowed to sign in (repeatable; default any)")
	cmd.Flags().StringVar(&p.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send (default: a new one, printed on stderr)")
	for _, name := range []string{"slug", "issuer", "display-name", "client-id"} {
		_ = cmd.MarkFlagRequired(name)
	}
}

// optional is the request's optional members: the secret (read from its file), scopes and
// email domains.
func (p *providerCreateFlags) optional(f *Factory) (secret *client.ClientSecret, scopes, domains *[]string, err error) {
	if p.ClientSecretFile != "" {
		s, err := readSecretFile(f, p.ClientSecretFile)
		if err != nil {
			return nil, nil, nil, err
		}
		secret = &client.ClientSecret{Value: &s}
	}
	if p.Scopes != nil {
		scopes = &p.Scopes
	}
	if p.AllowedEmailDomains != nil {
		domains = &p.AllowedEmailDomains
	}
	return secret, scopes, domains, nil
}

func newCmdIdentityProviderCreate(f *Factory, runF func(*identityProviderCreateOptions) error) *cobra.Command {
	opts := &identityProviderCreateOptions{f: f}
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Add an OpenID Connect provider (stored as a pending revision until a test activates it)",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return identityProviderCreateRun(cmd.Context(), opts)
		},
	}
	opts.register(cmd, "short name (immutable)")
	return cmd
}

// readSecretFile reads a secret from a file or stdin, without its trailing newline.
func readSecretFile(f *Factory, path string) (string, error) {
	b, err := readInput(f, path)
	if err != nil {
		return "", err
	}
	s := strings.TrimRight(string(b), "\r\n")
	if s == "" {
		return "", errors.New("the client secret file is empty")
	}
	return s, nil
}

func identityProviderCreateRun(ctx context.Context, opts *identityProviderCreateOptions) error {
	f := opts.f
	body := client.IdentityProviderCreate{Slug: opts.Slug, Protocol: client.ProviderProtocolOidc, Issuer: opts.Issuer,
		DisplayName: opts.DisplayName, ClientId: opts.ClientID}
	var err error
	if body.ClientSecret, body.Scopes, body.AllowedEmailDomains, err = opts.optional(f); err != nil {
		return err
	}
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	key := newIdempotencyKey(opts.IdempotencyKey)
	r, err := c.CreateIdentityProviderWithResponse(ctx, &client.CreateIdentityProviderParams{IdempotencyKey: key}, body)
	if err := f.checkKeyed(&key, r, err); err != nil {
		return err
	}
	return f.printIdentityProvider(r.Body, r.JSON201)
}

type identityProviderSetOptions struct {
	f *Factory

	ProviderID     string
	File           string
	IfMatch        string
	IdempotencyKey string
}

func newCmdIdentityProviderSet(f *Factory, runF func(*identityProviderSetOptions) error) *cobra.Command {
	opts := &identityProviderSetOptions{f: f}
	cmd := &cobra.Command{
		Use:   "set PROVIDER_ID -f provider.json --if-match VERSION",
		Short: "Replace a provider's configuration (a new pending revision)",
		Long: `Replace a provider's configuration with the JSON in a file ("-" for stdin): the body of
identity-provider get, edited, is accepted. "client_secret" left out keeps the stored secret,
{"value": "..."} replaces it, null clears it (only while the provider is disabled). The active
revision keeps serving sign-in until a test activates the new one. --if-match names the version
you read; "current" uses whatever is stored now.`,
		Args: positional("PROVIDER_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ProviderID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return identityProviderSetRun(cmd.Context(), opts)
		},
	}
	opts.document().register(cmd, `provider configuration (JSON); "-" reads stdin`, `version last read (3), or "current"`)
	return cmd
}

func (o *identityProviderSetOptions) document() documentFlags {
	return documentFlags{File: &o.File, IfMatch: &o.IfMatch, IdempotencyKey: &o.IdempotencyKey}
}

func identityProviderSetRun(ctx context.Context, opts *identityProviderSetOptions) error {
	f := opts.f
	r, err := putDocument(ctx, f, opts.document(),
		func() (*client.ClientWithResponses, error) { return f.Client(ctx) },
		func(ctx context.Context, c *client.ClientWithResponses) (*client.GetIdentityProviderResponse, error) {
			return c.GetIdentityProviderWithResponse(ctx, opts.ProviderID)
		},
		func(ctx context.Context, c *client.ClientWithResponses, tag string, key *string, body io.Reader) (*client.PutIdentityProviderResponse, error) {
			p := &client.PutIdentityProviderParams{IfMatch: tag, IdempotencyKey: key}
			return c.PutIdentityProviderWithBodyWithResponse(ctx, opts.ProviderID, p, "application/json", body)
		})
	if err != nil {
		return err
	}
	return f.printIdentityProvider(r.Body, r.JSON200)
}

type identityProviderDisableOptions struct {
	f *Factory

	ProviderID     string
	IdempotencyKey string
	Yes            bool
}

func newCmdIdentityProviderDisable(f *Factory, runF func(*identityProviderDisableOptions) error) *cobra.Command {
	opts := &identityProviderDisableOptions{f: f}
	cmd := &cobra.Command{
		Use:   "disable PROVIDER_ID",
		Short: "Stop a provider serving sign-in (refused if it is the last usable one)",
		Args:  positional("PROVIDER_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ProviderID = args[0]
			if err := f.needConfirmation(opts.Yes, "disabling "+opts.ProviderID); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return identityProviderDisableRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	cmd.Flags().BoolVar(&opts.Yes, "yes", false, "disable without asking")
	return cmd
}

func identityProviderDisableRun(ctx context.Context, opts *identityProviderDisableOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	if !opts.Yes {
		if err := f.confirmProvider(ctx, c, opts.ProviderID, "disable"); err != nil {
			return err
		}
	}
	key := optionalIdempotencyKey(opts.IdempotencyKey)
	p := &client.DisableIdentityProviderParams{IdempotencyKey: key}
	r, err := c.DisableIdentityProviderWithResponse(ctx, opts.ProviderID, p)
	if err := f.checkKeyed(key, r, err); err != nil {
		return err
	}
	return f.printIdentityProvider(r.Body, r.JSON200)
}

type identityProviderDeleteOptions struct {
	f *Factory

	ProviderID     string
	IdempotencyKey string
	Yes            bool
}

func newCmdIdentityProviderDelete(f *Factory, runF func(*identityProviderDeleteOptions) error) *cobra.Command {
	opts := &identityProviderDeleteOptions{f: f}
	cmd := &cobra.Command{
		Use:   "delete PROVIDER_ID",
		Short: "Delete a provider and its revisions (refused if it is the last usable one)",
		Args:  positional("PROVIDER_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ProviderID = args[0]
			if err := f.needConfirmation(opts.Yes, "deleting "+opts.ProviderID); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return identityProviderDeleteRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	cmd.Flags().BoolVar(&opts.Yes, "yes", false, "delete without asking")
	return cmd
}

func identityProviderDeleteRun(ctx context.Context, opts *identityProviderDeleteOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	if !opts.Yes {
		if err := f.confirmProvider(ctx, c, opts.ProviderID, "delete"); err != nil {
			return err
		}
	}
	key := optionalIdempotencyKey(opts.IdempotencyKey)
	p := &client.DeleteIdentityProviderParams{IdempotencyKey: key}
	r, err := c.DeleteIdentityProviderWithResponse(ctx, opts.ProviderID, p)
	if err := f.checkKeyed(key, r, err); err != nil {
		return err
	}
	_, err = fmt.Fprintf(f.Stderr, "Deleted identity provider %s.\n", opts.ProviderID)
	return err
}

// confirmProvider asks, on a terminal, before a provider stops serving sign-in.
func (f *Factory) confirmProvider(ctx context.Context, c *client.ClientWithResponses, id, verb string) error {
	r, err := c.GetIdentityProviderWithResponse(ctx, id)
	if err := check(r, err); err != nil {
		return err
	}
	p := r.JSON200
	return f.confirmYes(fmt.Sprintf("%s identity provider %s (%s, %s)? Its people can no longer sign in with it.",
		strings.ToUpper(verb[:1])+verb[1:], p.Slug, p.Issuer, p.Id))
}

type identityProviderTestOptions struct {
	f              *Factory
	ProviderID     string
	IdempotencyKey string
}

func newCmdIdentityProviderTest(f *Factory, runF func(*identityProviderTestOptions) error) *cobra.Command {
	opts := &identityProviderTestOptions{f: f}
	cmd := &cobra.Command{
		Use:   "test PROVIDER_ID",
		Short: "Start a test of the pending revision: prints a URL to open in a browser (single use)",
		Long: `Starts a test of the provider's pending revision and prints its test URL. Open it in a
browser within ten minutes and sign in at the provider: if the sign-in succeeds and the revision
is still the pending one, it becomes the active revision (and the provider is enabled).
The URL works once and is shown only now.`,
		Args: positional("PROVIDER_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ProviderID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return identityProviderTestRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	return cmd
}

func identityProviderTestRun(ctx context.Context, opts *identityProviderTestOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	key := newIdempotencyKey(opts.IdempotencyKey)
	r, err := c.StartIdentityProviderTestWithResponse(ctx, opts.ProviderID, &client.StartIdentityProviderTestParams{IdempotencyKey: key})
	if err := f.checkKeyed(&key, r, err); err != nil {
		return err
	}
	if f.JSON() {
		return f.printJSON(r.Body)
	}
	t := r.JSON201
	if t.TestUrl == nil {
		return fmt.Errorf("this Idempotency-Key already started a test, whose URL was shown once: start another test without --idempotency-key")
	}
	if _, err := fmt.Fprintln(f.Stdout, *t.TestUrl); err != nil {
		return err
	}
	_, err = fmt.Fprintf(f.Stderr, "Open the URL in a browser before %s and sign in: that tests revision %d and, if it is still pending, activates it.\n",
		t.ExpiresAt.UTC().Format(time.RFC3339), t.Revision)
	return err
}
