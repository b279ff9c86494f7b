package cli

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// newCmdSupport is `renga support`: the support source (who the operator's support people
// are) and organizations' support grants, read-only. Nothing here grants access to an
// organization: only its owners do (`renga owner support-grant create`).
func newCmdSupport(f *Factory) *cobra.Command {
	cmd := group("support", "Support access: who the support people are; organizations' grants (read-only)")
	cmd.AddCommand(newCmdSupportStatus(f, nil), newCmdSupportEnable(f, nil), newCmdSupportDisable(f, nil),
		newCmdSupportAccess(f, nil))
	return cmd
}

var supportSourceHeaders = []string{"ENABLED", "PROVIDER", "EMAILS", "DOMAIN", "VERSION"}

func supportSourceRow(s client.SupportSource) []string {
	emails := make([]string, 0, len(s.AllowedEmails))
	for _, e := range s.AllowedEmails {
		emails = append(emails, string(e))
	}
	enabled := "no"
	if s.Enabled {
		enabled = "yes"
	}
	return []string{enabled, orNone(s.ProviderId), strings.Join(emails, ","), orNone(s.AllowedEmailDomain), strconv.FormatInt(s.Version, 10)}
}

type supportStatusOptions struct {
	f *Factory
}

func newCmdSupportStatus(f *Factory, runF func(*supportStatusOptions) error) *cobra.Command {
	opts := &supportStatusOptions{f: f}
	return &cobra.Command{
		Use:   "status",
		Short: "Show the support source (its version is the If-Match for enable and disable)",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return supportStatusRun(cmd.Context(), opts)
		},
	}
}

func supportStatusRun(ctx context.Context, opts *supportStatusOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	r, err := c.GetSupportSourceWithResponse(ctx)
	if err := check(r, err); err != nil {
		return err
	}
	return f.print(r.Body, supportSourceHeaders, func() [][]string { return [][]string{supportSourceRow(*r.JSON200)} })
}

type supportEnableOptions struct {
	f *Factory

	ProviderID     string
	Emails         []string
	Domain         string
	IfMatch        string
	IdempotencyKey string
}

func newCmdSupportEnable(f *Factory, runF func(*supportEnableOptions) error) *cobra.Command {
	opts := &supportEnableOptions{f: f}
	cmd := &cobra.Command{
		Use:   "enable --provider PROVIDER_ID --if-match VERSION",
		Short: "Name the support people: who signs in with a provider, by email or domain",
		Long: `Replace the support source: support people are whoever signs in at /signin with the
deployment identity provider PROVIDER_ID and a verified email that is listed (--email, repeatable)
or in --domain. It grants no access to any organization: only an organization's owners do.
--if-match names the version you read (support status); "current" uses whatever is stored now.`,
		Args: positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(opts.Emails) == 0 && opts.Domain == "" {
				return usageError("name the support people: --email, --domain or both")
			}
			if runF != nil {
				return runF(opts)
			}
			return supportEnableRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.ProviderID, "provider", "", "deployment identity provider ID (idp_...)")
	cmd.Flags().StringSliceVar(&opts.Emails, "email", nil, "a support person's email (repeatable)")
	cmd.Flags().StringVar(&opts.Domain, "domain", "", "an email domain whose people are all support people")
	cmd.Flags().StringVar(&opts.IfMatch, "if-match", "", `version last read (3), or "current"`)
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	_ = cmd.MarkFlagRequired("provider")
	_ = cmd.MarkFlagRequired("if-match")
	return cmd
}

func supportEnableRun(ctx context.Context, opts *supportEnableOptions) error {
	enabled := true
	w := client.SupportSourceWrite{Enabled: &enabled, ProviderId: &opts.ProviderID}
	emails := make([]client.Email, 0, len(opts.Emails))
	for _, e := range opts.Emails {
		emails = append(emails, client.Email(e))
	}
	w.AllowedEmails = &emails
	if opts.Domain != "" {
		w.AllowedEmailDomain = &opts.Domain
	}
	return putSupportSource(ctx, opts.f, opts.IfMatch, opts.IdempotencyKey, func(client.SupportSource) client.SupportSourceWrite { return w })
}

// putSupportSource writes the document write makes of the one stored now, under If-Match.
func putSupportSource(ctx context.Context, f *Factory, ifMatch, idempotencyKey string, write func(client.SupportSource) client.SupportSourceWrite) error {
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	cur, err := c.GetSupportSourceWithResponse(ctx)
	if err := check(cur, err); err != nil {
		return err
	}
	tag, err := f.ifMatch(ifMatch, func() (string, error) { return cur.HTTPResponse.Header.Get("ETag"), nil })
	if err != nil {
		return err
	}
	key := optionalIdempotencyKey(idempotencyKey)
	r, err := c.PutSupportSourceWithResponse(ctx, &client.PutSupportSourceParams{IfMatch: tag, IdempotencyKey: key}, write(*cur.JSON200))
	if err := f.checkKeyed(key, r, err); err != nil {
		return err
	}
	return f.print(r.Body, supportSourceHeaders, func() [][]string { return [][]string{supportSourceRow(*r.JSON200)} })
}

type supportDisableOptions struct {
	f *Factory

	IfMatch        string
	IdempotencyKey string
}

func newCmdSupportDisable(f *Factory, runF func(*supportDisableOptions) error) *cobra.Command {
	opts := &supportDisableOptions{f: f}
	cmd := &cobra.Command{
		Use:   "disable --if-match VERSION",
		Short: "Stop support sign-in (the provider and people stay named, for enable later)",
		Long: `Disable the support source: nobody signs in as a support person, and the sessions of those
signed in end on their next request. Organizations' grants are left as their owners made them.`,
		Args: positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return supportDisableRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IfMatch, "if-match", "", `version last read (3), or "current"`)
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	_ = cmd.MarkFlagRequired("if-match")
	return cmd
}

func supportDisableRun(ctx context.Context, opts *supportDisableOptions) error {
	return putSupportSource(ctx, opts.f, opts.IfMatch, opts.IdempotencyKey, func(cur client.SupportSource) client.SupportSourceWrite {
		emails, enabled := cur.AllowedEmails, false
		return client.SupportSourceWrite{Enabled: &enabled, ProviderId: cur.ProviderId, AllowedEmails: &emails,
			AllowedEmailDomain: cur.AllowedEmailDomain}
	})
}

var supportGrantHeaders = []string{"ID", "STATE", "FOR", "GRANTED BY", "GRANTED", "EXPIRES", "REVOKED"}

func (f *Factory) supportGrantRow(g client.SupportGrant) []string {
	revoked := ""
	if g.RevokedAt != nil {
		revoked = f.timeCell(*g.RevokedAt)
	}
	who := "any support person"
	if g.SupportEmail != nil {
		who = *g.SupportEmail
	}
	return []string{g.Id, string(g.State), who, string(g.GrantedBy.Email), f.timeCell(g.GrantedAt), f.timeCell(g.ExpiresAt), revoked}
}

func (f *Factory) printSupportGrants(body []byte, list *client.SupportGrantList) error {
	return f.print(body, supportGrantHeaders, func() [][]string {
		var rows [][]string
		for _, g := range list.Items {
			rows = append(rows, f.supportGrantRow(g))
		}
		return rows
	})
}

type supportAccessOptions struct {
	f *Factory

	OrganizationID string
}

func newCmdSupportAccess(f *Factory, runF func(*supportAccessOptions) error) *cobra.Command {
	opts := &supportAccessOptions{f: f}
	return &cobra.Command{
		Use:   "access ORGANIZATION_ID",
		Short: "List the support grants an organization's owners made (metadata only)",
		Args:  positional("ORGANIZATION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return supportAccessRun(cmd.Context(), opts)
		},
	}
}

func supportAccessRun(ctx context.Context, opts *supportAccessOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	r, err := c.GetSupportAccessWithResponse(ctx, opts.OrganizationID, &client.GetSupportAccessParams{})
	if err := check(r, err); err != nil {
		return err
	}
	return f.printSupportGrants(r.Body, r.JSON200)
}

// newCmdSupportGrant is `renga owner support-grant`: the owners' grants of read-only access
// to the deployment's support people.
func newCmdSupportGrant(f *Factory) *cobra.Command {
	cmd := group("support-grant", "Let the deployment's support people read the organization, for a time")
	cmd.AddCommand(newCmdSupportGrantList(f, nil), newCmdSupportGrantCreate(f, nil), newCmdSupportGrantRevoke(f, nil))
	return cmd
}

type supportGrantListOptions struct {
	f *Factory
}

func newCmdSupportGrantList(f *Factory, runF func(*supportGrantListOptions) error) *cobra.Command {
	opts := &supportGrantListOptions{f: f}
	return &cobra.Command{
		Use:   "list",
		Short: "List the organization's support grants (any owner's), newest first",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return supportGrantListRun(cmd.Context(), opts)
		},
	}
}

func supportGrantListRun(ctx context.Context, opts *supportGrantListOptions) error {
	f := opts.f
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	r, err := c.ListSupportGrantsWithResponse(ctx, &client.ListSupportGrantsParams{})
	if err := check(r, err); err != nil {
		return err
	}
	return f.printSupportGrants(r.Body, r.JSON200)
}

type supportGrantCreateOptions struct {
	f *Factory

	ExpiresIn      time.Duration
	Email          string
	IdempotencyKey string
}

func newCmdSupportGrantCreate(f *Factory, runF func(*supportGrantCreateOptions) error) *cobra.Command {
	opts := &supportGrantCreateOptions{f: f}
	cmd := &cobra.Command{
		Use:   "create --expires-in DURATION",
		Short: "Let the support people (or one of them) read the organization until it expires",
		Long: `Grant the deployment's support people read-only access to the organization's inventory for
--expires-in (at most 720h). With --email, only that support person. Every read they make is in
the organization's Activity; any owner can revoke the grant at any moment.`,
		Args: positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.ExpiresIn <= 0 {
				return usageError("--expires-in must be positive")
			}
			if runF != nil {
				return runF(opts)
			}
			return supportGrantCreateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.ExpiresIn, "expires-in", 0, "how long the grant lasts (at most 720h)")
	cmd.Flags().StringVar(&opts.Email, "email", "", "only this support person")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send (default: a new one, printed on stderr unless refused)")
	_ = cmd.MarkFlagRequired("expires-in")
	return cmd
}

func supportGrantCreateRun(ctx context.Context, opts *supportGrantCreateOptions) error {
	f := opts.f
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	body := client.SupportGrantCreate{ExpiresAt: time.Now().Add(opts.ExpiresIn).UTC().Truncate(time.Second)}
	if opts.Email != "" {
		e := client.Email(opts.Email)
		body.SupportEmail = &e
	}
	key := newIdempotencyKey(opts.IdempotencyKey)
	r, err := c.CreateSupportGrantWithResponse(ctx, &client.CreateSupportGrantParams{IdempotencyKey: key}, body)
	if err := f.checkKeyed(&key, r, err); err != nil {
		return err
	}
	return f.print(r.Body, supportGrantHeaders, func() [][]string { return [][]string{f.supportGrantRow(*r.JSON201)} })
}

type supportGrantRevokeOptions struct {
	f *Factory

	GrantID        string
	IdempotencyKey string
}

func newCmdSupportGrantRevoke(f *Factory, runF func(*supportGrantRevokeOptions) error) *cobra.Command {
	opts := &supportGrantRevokeOptions{f: f}
	cmd := &cobra.Command{
		Use:   "revoke GRANT_ID",
		Short: "End a support grant now",
		Args:  positional("GRANT_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.GrantID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return supportGrantRevokeRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	return cmd
}

func supportGrantRevokeRun(ctx context.Context, opts *supportGrantRevokeOptions) error {
	f := opts.f
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	key := optionalIdempotencyKey(opts.IdempotencyKey)
	r, err := c.RevokeSupportGrantWithResponse(ctx, opts.GrantID, &client.RevokeSupportGrantParams{IdempotencyKey: key})
	if err := f.checkKeyed(key, r, err); err != nil {
		return err
	}
	return f.print(r.Body, supportGrantHeaders, func() [][]string { return [][]string{f.supportGrantRow(*r.JSON200)} })
}
