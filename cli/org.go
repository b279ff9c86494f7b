package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

func newOrgCommand(f *Factory) *cobra.Command {
	cmd := group("org", "Organizations hosted by the deployment", "organization")
	cmd.AddCommand(newOrgCreateCommand(f), newOrgListCommand(f), newOrgGetCommand(f), newOrgUpdateCommand(f))
	cmd.AddCommand(newOrgLifecycleCommands(f)...)
	return cmd
}

var orgHeaders = []string{"ID", "SLUG", "DISPLAY NAME", "STATE", "VERSION", "CREATED"}

func (f *Factory) orgRow(o client.Organization) []string {
	return []string{o.Id, o.Slug, o.DisplayName, string(o.State), strconv.FormatInt(o.Version, 10), f.timeCell(o.CreatedAt)}
}

type orgCreateOptions struct {
	displayName    string
	idempotencyKey string
}

func newOrgCreateCommand(f *Factory) *cobra.Command {
	o := &orgCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create SLUG --display-name NAME",
		Short: "Create an organization",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := f.Client(ctx)
			if err != nil {
				return err
			}
			key := f.idempotencyKey(o.idempotencyKey)
			resp, err := c.CreateOrganizationWithResponse(ctx, &client.CreateOrganizationParams{IdempotencyKey: key},
				client.OrganizationCreate{Slug: args[0], DisplayName: o.displayName})
			if err := check(resp, err); err != nil {
				return err
			}
			return f.print(resp.Body, orgHeaders, func() [][]string { return [][]string{f.orgRow(*resp.JSON201)} })
		},
	}
	cmd.Flags().StringVar(&o.displayName, "display-name", "", "the organization's display name")
	cmd.Flags().StringVar(&o.idempotencyKey, "idempotency-key", "", "Idempotency-Key to send (default: a new one, printed on stderr)")
	_ = cmd.MarkFlagRequired("display-name")
	return cmd
}

type orgListOptions struct {
	state, slug string
	pageSize    int
	pageToken   string
	all         bool
}

func newOrgListCommand(f *Factory) *cobra.Command {
	o := &orgListOptions{}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List organizations",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := f.Client(ctx)
			if err != nil {
				return err
			}
			params := &client.ListOrganizationsParams{}
			if o.state != "" {
				st := client.OrganizationState(o.state)
				params.State = &st
			}
			if o.slug != "" {
				params.Slug = &o.slug
			}
			if o.pageSize > 0 {
				params.PageSize = &o.pageSize
			}
			if o.pageToken != "" {
				params.PageToken = &o.pageToken
			}
			resp, err := c.ListOrganizationsWithResponse(ctx, params)
			if err := check(resp, err); err != nil {
				return err
			}
			if !o.all || resp.JSON200.NextPageToken == nil {
				return f.print(resp.Body, orgHeaders, func() [][]string {
					var rows [][]string
					for _, org := range resp.JSON200.Items {
						rows = append(rows, f.orgRow(org))
					}
					return rows
				})
			}
			return f.listAllOrgs(ctx, c, params, resp.JSON200)
		},
	}
	cmd.Flags().StringVar(&o.state, "state", "", "only this state: active, suspended, deletion_pending, purging or moved")
	cmd.Flags().StringVar(&o.slug, "slug", "", "only the organization with this slug")
	cmd.Flags().IntVar(&o.pageSize, "page-size", 0, "items per page (1-500; default 100)")
	cmd.Flags().StringVar(&o.pageToken, "page-token", "", "next_page_token of the previous page")
	cmd.Flags().BoolVar(&o.all, "all", false, "follow next_page_token through every page")
	return cmd
}

// listAllOrgs follows the pages and prints them as one list ({"items": [...], "next_page_token": null}).
func (f *Factory) listAllOrgs(ctx context.Context, c *client.ClientWithResponses, params *client.ListOrganizationsParams, first *client.OrganizationList) error {
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
	var rows [][]string
	for _, org := range all {
		rows = append(rows, f.orgRow(org))
	}
	return f.printTable(orgHeaders, rows)
}

func newOrgGetCommand(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "get ORGANIZATION_ID",
		Short: "Show an organization",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			resp, err := c.GetOrganizationWithResponse(cmd.Context(), args[0])
			if err := check(resp, err); err != nil {
				return err
			}
			return f.print(resp.Body, orgHeaders, func() [][]string { return [][]string{f.orgRow(*resp.JSON200)} })
		},
	}
}

type orgUpdateOptions struct {
	displayName    string
	ifMatch        string
	idempotencyKey string
}

func newOrgUpdateCommand(f *Factory) *cobra.Command {
	o := &orgUpdateOptions{}
	cmd := &cobra.Command{
		Use:   "update ORGANIZATION_ID --display-name NAME --if-match VERSION",
		Short: "Change an organization's display name",
		Long: `Change an organization's display name. --if-match names the version you last read (org get);
pass --if-match current to use whatever version is stored now, overwriting changes you have not
seen. A stale version fails with exit code 5.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := f.Client(ctx)
			if err != nil {
				return err
			}
			ifMatch, err := f.ifMatch(o.ifMatch, func() (string, error) {
				resp, err := c.GetOrganizationWithResponse(ctx, args[0])
				if err := check(resp, err); err != nil {
					return "", err
				}
				return resp.HTTPResponse.Header.Get("ETag"), nil
			})
			if err != nil {
				return err
			}
			params := &client.UpdateOrganizationParams{IfMatch: ifMatch}
			if o.idempotencyKey != "" {
				params.IdempotencyKey = &o.idempotencyKey
				f.reportKey(o.idempotencyKey)
			}
			resp, err := c.UpdateOrganizationWithResponse(ctx, args[0], params, client.OrganizationUpdate{DisplayName: o.displayName})
			if err := check(resp, err); err != nil {
				return err
			}
			return f.print(resp.Body, orgHeaders, func() [][]string { return [][]string{f.orgRow(*resp.JSON200)} })
		},
	}
	cmd.Flags().StringVar(&o.displayName, "display-name", "", "the new display name")
	cmd.Flags().StringVar(&o.ifMatch, "if-match", "", `version last read (3 or "3"), or "current"`)
	cmd.Flags().StringVar(&o.idempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	_ = cmd.MarkFlagRequired("display-name")
	_ = cmd.MarkFlagRequired("if-match")
	return cmd
}

// ifMatch is the If-Match value: the flag's version quoted as a strong tag, or, for "current",
// the ETag stored now (an explicit choice to overwrite unseen changes).
func (f *Factory) ifMatch(flag string, current func() (string, error)) (string, error) {
	if flag == "current" {
		tag, err := current()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(f.Stderr, "If-Match: %s (the current version)\n", tag)
		return tag, nil
	}
	if _, err := strconv.ParseInt(flag, 10, 64); err == nil {
		return `"` + flag + `"`, nil
	}
	return flag, nil
}
