package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	openapi_types "github.com/oapi-codegen/runtime/types"
	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// orgStateCommand is suspend, resume, delete or undelete: a target-state change of one
// organization that prints the organization.
func orgStateCommand(f *Factory, use, short string, call func(ctx context.Context, c *client.ClientWithResponses, id string, key *string) (apiResponse, []byte, *client.Organization, error)) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			var k *string
			if key != "" {
				k = &key
				f.reportKey(key)
			}
			resp, body, org, err := call(cmd.Context(), c, args[0], k)
			if err := check(resp, err); err != nil {
				return err
			}
			return f.print(body, orgHeaders, func() [][]string { return [][]string{f.orgRow(*org)} })
		},
	}
	cmd.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key to send")
	return cmd
}

func newOrgLifecycleCommands(f *Factory) []*cobra.Command {
	var reason string
	suspend := orgStateCommand(f, "suspend ORGANIZATION_ID --reason TEXT", "Suspend an organization (its owners can read, not write)",
		func(ctx context.Context, c *client.ClientWithResponses, id string, key *string) (apiResponse, []byte, *client.Organization, error) {
			r, err := c.SuspendOrganizationWithResponse(ctx, id, &client.SuspendOrganizationParams{IdempotencyKey: key}, client.SuspendRequest{Reason: reason})
			if err != nil {
				return nil, nil, nil, err
			}
			return r, r.Body, r.JSON200, nil
		})
	suspend.Flags().StringVar(&reason, "reason", "", "why (the owners see it in their Activity)")
	_ = suspend.MarkFlagRequired("reason")
	resume := orgStateCommand(f, "resume ORGANIZATION_ID", "Resume a suspended organization (also cancels a scheduled deletion)",
		func(ctx context.Context, c *client.ClientWithResponses, id string, key *string) (apiResponse, []byte, *client.Organization, error) {
			r, err := c.ResumeOrganizationWithResponse(ctx, id, &client.ResumeOrganizationParams{IdempotencyKey: key})
			if err != nil {
				return nil, nil, nil, err
			}
			return r, r.Body, r.JSON200, nil
		})
	del := orgStateCommand(f, "delete ORGANIZATION_ID", "Schedule an organization's deletion (purged after the grace period)",
		func(ctx context.Context, c *client.ClientWithResponses, id string, key *string) (apiResponse, []byte, *client.Organization, error) {
			r, err := c.ScheduleOrganizationDeletionWithResponse(ctx, id, &client.ScheduleOrganizationDeletionParams{IdempotencyKey: key})
			if err != nil {
				return nil, nil, nil, err
			}
			return r, r.Body, r.JSON200, nil
		})
	undel := orgStateCommand(f, "undelete ORGANIZATION_ID", "Cancel a scheduled deletion (impossible once the purge started)",
		func(ctx context.Context, c *client.ClientWithResponses, id string, key *string) (apiResponse, []byte, *client.Organization, error) {
			r, err := c.CancelOrganizationDeletionWithResponse(ctx, id, &client.CancelOrganizationDeletionParams{IdempotencyKey: key})
			if err != nil {
				return nil, nil, nil, err
			}
			return r, r.Body, r.JSON200, nil
		})
	owners := &cobra.Command{
		Use:   "owners ORGANIZATION_ID",
		Short: "List an organization's owners",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := c.ListOrganizationOwnersWithResponse(cmd.Context(), args[0], &client.ListOrganizationOwnersParams{})
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
		},
	}
	var inviteKey string
	invite := &cobra.Command{
		Use:   "invite ORGANIZATION_ID EMAIL",
		Short: "Invite an owner (the invitation's secret goes only to the mail)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			key := f.idempotencyKey(inviteKey)
			r, err := c.CreateInvitationWithResponse(cmd.Context(), args[0], &client.CreateInvitationParams{IdempotencyKey: key},
				client.InvitationCreate{Email: openapi_types.Email(args[1])})
			if err := check(r, err); err != nil {
				return err
			}
			return f.print(r.Body, invitationHeaders, func() [][]string { return [][]string{f.invitationRow(*r.JSON201)} })
		},
	}
	invite.Flags().StringVar(&inviteKey, "idempotency-key", "", "Idempotency-Key to send (default: a new one, printed on stderr)")
	return []*cobra.Command{suspend, resume, del, undel, owners, invite}
}

var invitationHeaders = []string{"ID", "EMAIL", "STATE", "CREATED", "EXPIRES"}

func (f *Factory) invitationRow(i client.Invitation) []string {
	return []string{i.Id, string(i.Email), string(i.State), f.timeCell(i.CreatedAt), f.timeCell(i.ExpiresAt)}
}

func newInvitationCommand(f *Factory) *cobra.Command {
	cmd := group("invitation", "Owner invitations")
	var state string
	list := &cobra.Command{
		Use:   "list ORGANIZATION_ID",
		Short: "List an organization's invitations, newest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			p := &client.ListInvitationsParams{}
			if state != "" {
				s := client.InvitationState(state)
				p.State = &s
			}
			r, err := c.ListInvitationsWithResponse(cmd.Context(), args[0], p)
			if err := check(r, err); err != nil {
				return err
			}
			return f.print(r.Body, invitationHeaders, func() [][]string {
				var rows [][]string
				for _, i := range r.JSON200.Items {
					rows = append(rows, f.invitationRow(i))
				}
				return rows
			})
		},
	}
	list.Flags().StringVar(&state, "state", "", "only pending, accepted, revoked or expired")
	get := &cobra.Command{
		Use:   "get ORGANIZATION_ID INVITATION_ID",
		Short: "Show an invitation",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := c.GetInvitationWithResponse(cmd.Context(), args[0], args[1])
			if err := check(r, err); err != nil {
				return err
			}
			return f.print(r.Body, invitationHeaders, func() [][]string { return [][]string{f.invitationRow(*r.JSON200)} })
		},
	}
	var key string
	revoke := &cobra.Command{
		Use:   "revoke ORGANIZATION_ID INVITATION_ID",
		Short: "Revoke an invitation (revoking a used or revoked one changes nothing)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			p := &client.RevokeInvitationParams{}
			if key != "" {
				p.IdempotencyKey = &key
				f.reportKey(key)
			}
			r, err := c.RevokeInvitationWithResponse(cmd.Context(), args[0], args[1], p)
			if err := check(r, err); err != nil {
				return err
			}
			return f.print(r.Body, invitationHeaders, func() [][]string { return [][]string{f.invitationRow(*r.JSON200)} })
		},
	}
	revoke.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key to send")
	cmd.AddCommand(list, get, revoke)
	return cmd
}

func newPolicyCommand(f *Factory) *cobra.Command {
	cmd := group("policy", "Organization policy documents")
	get := &cobra.Command{
		Use:   "get ORGANIZATION_ID",
		Short: "Print an organization's policy document (its version is the If-Match for set)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := c.GetPolicyWithResponse(cmd.Context(), args[0])
			if err := check(r, err); err != nil {
				return err
			}
			// A policy is a document: JSON whatever the output format.
			return f.printJSON(r.Body)
		},
	}
	var file, ifMatch, key string
	set := &cobra.Command{
		Use:   "set ORGANIZATION_ID -f policy.json --if-match VERSION",
		Short: "Replace an organization's policy document",
		Long: `Replace an organization's policy document with the JSON in a file ("-" for stdin). Fields left
out inherit the deployment's defaults. --if-match names the version you read (policy get); pass
--if-match current to use whatever version is stored now, overwriting changes you have not seen.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			body, err := readInput(f, file)
			if err != nil {
				return err
			}
			c, err := f.Client(ctx)
			if err != nil {
				return err
			}
			tag, err := f.ifMatch(ifMatch, func() (string, error) {
				r, err := c.GetPolicyWithResponse(ctx, args[0])
				if err := check(r, err); err != nil {
					return "", err
				}
				return r.HTTPResponse.Header.Get("ETag"), nil
			})
			if err != nil {
				return err
			}
			p := &client.PutPolicyParams{IfMatch: tag}
			if key != "" {
				p.IdempotencyKey = &key
				f.reportKey(key)
			}
			r, err := c.PutPolicyWithBodyWithResponse(ctx, args[0], p, "application/json", strings.NewReader(string(body)))
			if err := check(r, err); err != nil {
				return err
			}
			return f.printJSON(r.Body)
		},
	}
	set.Flags().StringVarP(&file, "file", "f", "", `policy document (JSON); "-" reads stdin`)
	set.Flags().StringVar(&ifMatch, "if-match", "", `version last read (3), or "current"`)
	set.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key to send")
	_ = set.MarkFlagRequired("file")
	_ = set.MarkFlagRequired("if-match")
	effective := &cobra.Command{
		Use:   "effective ORGANIZATION_ID",
		Short: "Show the policy in force and where each value comes from",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.Client(cmd.Context())
			if err != nil {
				return err
			}
			r, err := c.GetEffectivePolicyWithResponse(cmd.Context(), args[0])
			if err := check(r, err); err != nil {
				return err
			}
			return f.print(r.Body, []string{"NAME", "VALUE", "SOURCE"}, func() [][]string {
				e := r.JSON200
				i := func(n string, v client.EffectiveInteger) []string {
					return []string{n, strconv.FormatInt(v.Value, 10), string(v.Source)}
				}
				b := func(n string, v client.EffectiveBoolean) []string {
					return []string{n, strconv.FormatBool(v.Value), string(v.Source)}
				}
				return [][]string{
					i("limits.max_agents", e.Limits.MaxAgents), i("limits.max_users", e.Limits.MaxUsers),
					i("limits.intake_bytes_per_day", e.Limits.IntakeBytesPerDay),
					i("limits.observation_retention_days", e.Limits.ObservationRetentionDays),
					i("limits.max_jobs_per_day", e.Limits.MaxJobsPerDay),
					b("entitlements.organization_identity_providers", e.Entitlements.OrganizationIdentityProviders),
					b("entitlements.jobs", e.Entitlements.Jobs), b("entitlements.owner_export", e.Entitlements.OwnerExport),
					b("settings.require_sso", e.Settings.RequireSso), b("settings.require_mfa", e.Settings.RequireMfa),
					i("settings.session_max_age_hours", e.Settings.SessionMaxAgeHours),
					{"settings.allowed_email_domains", strings.Join(e.Settings.AllowedEmailDomains.Value, ","), string(e.Settings.AllowedEmailDomains.Source)},
				}
			})
		},
	}
	cmd.AddCommand(get, set, effective)
	return cmd
}

func readInput(f *Factory, file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(f.Stdin)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, usageError("%v", err)
	}
	return b, nil
}

func newUsageCommand(f *Factory) *cobra.Command {
	var from, to string
	cmd := &cobra.Command{
		Use:   "usage [ORGANIZATION_ID] --from DATE --to DATE",
		Short: "Usage: an organization's daily rows, or totals per organization",
		Long: `With an organization ID, its daily usage from --from to --to (UTC days, inclusive); without,
the totals of every organization with usage in the range. Dates are YYYY-MM-DD; --to defaults to
today and --from to 29 days before --to.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			fromD, toD, err := dateRange(from, to)
			if err != nil {
				return err
			}
			c, err := f.Client(ctx)
			if err != nil {
				return err
			}
			if len(args) == 1 {
				r, err := c.GetOrganizationUsageWithResponse(ctx, args[0], &client.GetOrganizationUsageParams{From: fromD, To: toD})
				if err := check(r, err); err != nil {
					return err
				}
				return f.print(r.Body, []string{"DAY", "INTAKE REQUESTS", "INTAKE BYTES", "JOBS", "TERMINAL MINUTES"}, func() [][]string {
					var rows [][]string
					for _, d := range r.JSON200.Days {
						rows = append(rows, []string{d.Day.String(), fmt.Sprint(d.IntakeRequests), fmt.Sprint(d.IntakeBytes),
							fmt.Sprint(d.JobsCreated), fmt.Sprint(d.TerminalMinutes)})
					}
					return rows
				})
			}
			r, err := c.ListUsageWithResponse(ctx, &client.ListUsageParams{From: fromD, To: toD})
			if err := check(r, err); err != nil {
				return err
			}
			return f.print(r.Body, []string{"ORGANIZATION", "INTAKE REQUESTS", "INTAKE BYTES", "JOBS", "TERMINAL MINUTES"}, func() [][]string {
				var rows [][]string
				for _, t := range r.JSON200.Items {
					rows = append(rows, []string{t.OrganizationId, fmt.Sprint(t.IntakeRequests), fmt.Sprint(t.IntakeBytes),
						fmt.Sprint(t.JobsCreated), fmt.Sprint(t.TerminalMinutes)})
				}
				return rows
			})
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "first UTC day (YYYY-MM-DD)")
	cmd.Flags().StringVar(&to, "to", "", "last UTC day (YYYY-MM-DD)")
	return cmd
}

func dateRange(from, to string) (openapi_types.Date, openapi_types.Date, error) {
	t := time.Now().UTC().Truncate(24 * time.Hour)
	if to != "" {
		var err error
		if t, err = time.Parse(time.DateOnly, to); err != nil {
			return openapi_types.Date{}, openapi_types.Date{}, usageError("--to must be YYYY-MM-DD")
		}
	}
	f := t.AddDate(0, 0, -29)
	if from != "" {
		var err error
		if f, err = time.Parse(time.DateOnly, from); err != nil {
			return openapi_types.Date{}, openapi_types.Date{}, usageError("--from must be YYYY-MM-DD")
		}
	}
	return openapi_types.Date{Time: f}, openapi_types.Date{Time: t}, nil
}
