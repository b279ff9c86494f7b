package cli

import (
	"context"
	"strconv"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// newCmdOrganization is `renga org`: the organizations hosted by the deployment.
func newCmdOrganization(f *Factory) *cobra.Command {
	cmd := group("org", "Organizations hosted by the deployment", "organization")
	cmd.AddCommand(newCmdOrganizationCreate(f, nil), newCmdOrganizationList(f, nil), newCmdOrganizationGet(f, nil),
		newCmdOrganizationUpdate(f, nil), newCmdOrganizationSuspend(f, nil), newCmdOrganizationResume(f, nil),
		newCmdOrganizationDelete(f, nil), newCmdOrganizationUndelete(f, nil), newCmdOrganizationOwners(f, nil),
		newCmdInvitationCreate(f, nil))
	return cmd
}

var organizationHeaders = []string{"ID", "SLUG", "DISPLAY NAME", "STATE", "VERSION", "CREATED"}

func (f *Factory) organizationRow(o client.Organization) []string {
	return []string{o.Id, o.Slug, o.DisplayName, string(o.State), strconv.FormatInt(o.Version, 10), f.timeCell(o.CreatedAt)}
}

// printOrganization prints the organization a command returned.
func (f *Factory) printOrganization(body []byte, o *client.Organization) error {
	return f.print(body, organizationHeaders, func() [][]string { return [][]string{f.organizationRow(*o)} })
}

type organizationCreateOptions struct {
	f *Factory

	Slug           string
	DisplayName    string
	IdempotencyKey string
}

func newCmdOrganizationCreate(f *Factory, runF func(*organizationCreateOptions) error) *cobra.Command {
	opts := &organizationCreateOptions{f: f}
	cmd := &cobra.Command{
		Use:   "create SLUG --display-name NAME",
		Short: "Create an organization",
		Args:  positional("SLUG"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Slug = args[0]
			if runF != nil {
				return runF(opts)
			}
			return organizationCreateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.DisplayName, "display-name", "", "the organization's display name")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send (default: a new one, printed on stderr unless refused)")
	_ = cmd.MarkFlagRequired("display-name")
	return cmd
}

func organizationCreateRun(ctx context.Context, opts *organizationCreateOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	key := newIdempotencyKey(opts.IdempotencyKey)
	resp, err := c.CreateOrganizationWithResponse(ctx, &client.CreateOrganizationParams{IdempotencyKey: key},
		client.OrganizationCreate{Slug: opts.Slug, DisplayName: opts.DisplayName})
	if err := f.checkKeyed(&key, resp, err); err != nil {
		return err
	}
	return f.printOrganization(resp.Body, resp.JSON201)
}

type organizationListOptions struct {
	f *Factory

	State     string
	Slug      string
	PageSize  int
	PageToken string
	All       bool
}

func newCmdOrganizationList(f *Factory, runF func(*organizationListOptions) error) *cobra.Command {
	opts := &organizationListOptions{f: f}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List organizations",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return organizationListRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.State, "state", "", "only this state: active, suspended, deletion_pending, purging or moved")
	cmd.Flags().StringVar(&opts.Slug, "slug", "", "only the organization with this slug")
	cmd.Flags().IntVar(&opts.PageSize, "page-size", 0, "items per page (1-500; default 100)")
	cmd.Flags().StringVar(&opts.PageToken, "page-token", "", "next_page_token of the previous page")
	cmd.Flags().BoolVar(&opts.All, "all", false, "follow next_page_token through every page")
	return cmd
}

func organizationListRun(ctx context.Context, opts *organizationListOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	params := &client.ListOrganizationsParams{}
	if opts.State != "" {
		st := client.OrganizationState(opts.State)
		params.State = &st
	}
	if opts.Slug != "" {
		params.Slug = &opts.Slug
	}
	if opts.PageSize > 0 {
		params.PageSize = &opts.PageSize
	}
	if opts.PageToken != "" {
		params.PageToken = &opts.PageToken
	}
	resp, err := c.ListOrganizationsWithResponse(ctx, params)
	if err := check(resp, err); err != nil {
		return err
	}
	if !opts.All || resp.JSON200.NextPageToken == nil {
		return f.print(resp.Body, organizationHeaders, func() [][]string { return f.organizationRows(resp.JSON200.Items) })
	}
	return organizationListAll(ctx, f, c, params, resp.JSON200)
}

func (f *Factory) organizationRows(orgs []client.Organization) [][]string {
	var rows [][]string
	for _, o := range orgs {
		rows = append(rows, f.organizationRow(o))
	}
	return rows
}

// organizationListAll follows the pages and prints them as one list ({"items": [...],
// "next_page_token": null}).
func organizationListAll(ctx context.Context, f *Factory, c *client.ClientWithResponses, params *client.ListOrganizationsParams, first *client.OrganizationList) error {
	all := first.Items
	next := first.NextPageToken
	for next != nil {
		params.PageToken = next
		resp, err := c.ListOrganizationsWithResponse(ctx, params)
		if err := check(resp, err); err != nil {
			return err
		}
		all = append(all, resp.JSON200.Items...)
		next = resp.JSON200.NextPageToken
	}
	if f.JSON() {
		return writeJSON(f, client.OrganizationList{Items: all})
	}
	return f.printTable(organizationHeaders, f.organizationRows(all))
}

type organizationGetOptions struct {
	f *Factory

	OrganizationID string
}

func newCmdOrganizationGet(f *Factory, runF func(*organizationGetOptions) error) *cobra.Command {
	opts := &organizationGetOptions{f: f}
	return &cobra.Command{
		Use:   "get ORGANIZATION_ID",
		Short: "Show an organization",
		Args:  positional("ORGANIZATION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return organizationGetRun(cmd.Context(), opts)
		},
	}
}

func organizationGetRun(ctx context.Context, opts *organizationGetOptions) error {
	c, err := opts.f.Client(ctx)
	if err != nil {
		return err
	}
	resp, err := c.GetOrganizationWithResponse(ctx, opts.OrganizationID)
	if err := check(resp, err); err != nil {
		return err
	}
	return opts.f.printOrganization(resp.Body, resp.JSON200)
}

type organizationUpdateOptions struct {
	f *Factory

	OrganizationID string
	DisplayName    string
	IfMatch        string
	IdempotencyKey string
}

func newCmdOrganizationUpdate(f *Factory, runF func(*organizationUpdateOptions) error) *cobra.Command {
	opts := &organizationUpdateOptions{f: f}
	cmd := &cobra.Command{
		Use:   "update ORGANIZATION_ID --display-name NAME --if-match VERSION",
		Short: "Change an organization's display name",
		Long: `Change an organization's display name. --if-match names the version you last read (org get);
pass --if-match current to use whatever version is stored now, overwriting changes you have not
seen. A stale version fails with exit code 5.`,
		Args: positional("ORGANIZATION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return organizationUpdateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.DisplayName, "display-name", "", "the new display name")
	cmd.Flags().StringVar(&opts.IfMatch, "if-match", "", `version last read (3 or "3"), or "current"`)
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	_ = cmd.MarkFlagRequired("display-name")
	_ = cmd.MarkFlagRequired("if-match")
	return cmd
}

func organizationUpdateRun(ctx context.Context, opts *organizationUpdateOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	ifMatch, err := f.ifMatch(opts.IfMatch, func() (string, error) {
		resp, err := c.GetOrganizationWithResponse(ctx, opts.OrganizationID)
		if err := check(resp, err); err != nil {
			return "", err
		}
		return resp.HTTPResponse.Header.Get("ETag"), nil
	})
	if err != nil {
		return err
	}
	key := optionalIdempotencyKey(opts.IdempotencyKey)
	params := &client.UpdateOrganizationParams{IfMatch: ifMatch, IdempotencyKey: key}
	resp, err := c.UpdateOrganizationWithResponse(ctx, opts.OrganizationID, params, client.OrganizationUpdate{DisplayName: opts.DisplayName})
	if err := f.checkKeyed(key, resp, err); err != nil {
		return err
	}
	return f.printOrganization(resp.Body, resp.JSON200)
}

type organizationOwnersOptions struct {
	f *Factory

	OrganizationID string
}

func newCmdOrganizationOwners(f *Factory, runF func(*organizationOwnersOptions) error) *cobra.Command {
	opts := &organizationOwnersOptions{f: f}
	return &cobra.Command{
		Use:   "owners ORGANIZATION_ID",
		Short: "List an organization's owners",
		Args:  positional("ORGANIZATION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return organizationOwnersRun(cmd.Context(), opts)
		},
	}
}

func organizationOwnersRun(ctx context.Context, opts *organizationOwnersOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	r, err := c.ListOrganizationOwnersWithResponse(ctx, opts.OrganizationID, &client.ListOrganizationOwnersParams{})
	if err := check(r, err); err != nil {
		return err
	}
	return f.print(r.Body, []string{"USER ID", "EMAIL", "NAME", "SINCE"}, func() [][]string {
		var rows [][]string
		for _, o := range r.JSON200.Items {
			rows = append(rows, []string{o.UserId, string(o.Email), o.DisplayName, f.timeCell(o.Since)})
		}
		return rows
	})
}
