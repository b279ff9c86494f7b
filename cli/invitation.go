package cli

import (
	"context"
	"fmt"

	openapi_types "github.com/oapi-codegen/runtime/types"
	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// newCmdInvitation is `renga invitation`: an organization's owner invitations. Creating one is
// `renga org invite`; accepting one is the invited owner's `renga owner accept`.
func newCmdInvitation(f *Factory) *cobra.Command {
	cmd := group("invitation", "Owner invitations")
	cmd.AddCommand(newCmdInvitationList(f, nil), newCmdInvitationGet(f, nil), newCmdInvitationRevoke(f, nil))
	return cmd
}

var invitationHeaders = []string{"ID", "EMAIL", "STATE", "CREATED", "EXPIRES"}

func (f *Factory) invitationRow(i client.Invitation) []string {
	return []string{i.Id, string(i.Email), string(i.State), f.timeCell(i.CreatedAt), f.timeCell(i.ExpiresAt)}
}

// printInvitation prints the invitation a command returned.
func (f *Factory) printInvitation(body []byte, i *client.Invitation) error {
	return f.print(body, invitationHeaders, func() [][]string { return [][]string{f.invitationRow(*i)} })
}

type invitationCreateOptions struct {
	f *Factory

	OrganizationID string
	Email          string
	IdempotencyKey string
}

// newCmdInvitationCreate is `renga org invite`.
func newCmdInvitationCreate(f *Factory, runF func(*invitationCreateOptions) error) *cobra.Command {
	opts := &invitationCreateOptions{f: f}
	cmd := &cobra.Command{
		Use:   "invite ORGANIZATION_ID EMAIL",
		Short: "Invite an owner (the invitation's secret goes only to the mail)",
		Args:  positional("ORGANIZATION_ID", "EMAIL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID, opts.Email = args[0], args[1]
			if runF != nil {
				return runF(opts)
			}
			return invitationCreateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send (default: a new one, printed on stderr unless refused)")
	return cmd
}

func invitationCreateRun(ctx context.Context, opts *invitationCreateOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	key := newIdempotencyKey(opts.IdempotencyKey)
	r, err := c.CreateInvitationWithResponse(ctx, opts.OrganizationID, &client.CreateInvitationParams{IdempotencyKey: key},
		client.InvitationCreate{Email: openapi_types.Email(opts.Email)})
	if err := f.checkKeyed(&key, r, err); err != nil {
		return err
	}
	return f.printInvitation(r.Body, r.JSON201)
}

type invitationListOptions struct {
	f *Factory

	OrganizationID string
	State          string
}

func newCmdInvitationList(f *Factory, runF func(*invitationListOptions) error) *cobra.Command {
	opts := &invitationListOptions{f: f}
	cmd := &cobra.Command{
		Use:   "list ORGANIZATION_ID",
		Short: "List an organization's invitations, newest first",
		Args:  positional("ORGANIZATION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return invitationListRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.State, "state", "", "only pending, accepted, revoked or expired")
	return cmd
}

func invitationListRun(ctx context.Context, opts *invitationListOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	p := &client.ListInvitationsParams{}
	if opts.State != "" {
		s := client.InvitationState(opts.State)
		p.State = &s
	}
	r, err := c.ListInvitationsWithResponse(ctx, opts.OrganizationID, p)
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
}

type invitationGetOptions struct {
	f *Factory

	OrganizationID string
	InvitationID   string
}

func newCmdInvitationGet(f *Factory, runF func(*invitationGetOptions) error) *cobra.Command {
	opts := &invitationGetOptions{f: f}
	return &cobra.Command{
		Use:   "get ORGANIZATION_ID INVITATION_ID",
		Short: "Show an invitation",
		Args:  positional("ORGANIZATION_ID", "INVITATION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID, opts.InvitationID = args[0], args[1]
			if runF != nil {
				return runF(opts)
			}
			return invitationGetRun(cmd.Context(), opts)
		},
	}
}

func invitationGetRun(ctx context.Context, opts *invitationGetOptions) error {
	c, err := opts.f.Client(ctx)
	if err != nil {
		return err
	}
	r, err := c.GetInvitationWithResponse(ctx, opts.OrganizationID, opts.InvitationID)
	if err := check(r, err); err != nil {
		return err
	}
	return opts.f.printInvitation(r.Body, r.JSON200)
}

type invitationRevokeOptions struct {
	f *Factory

	OrganizationID string
	InvitationID   string
	IdempotencyKey string
	Yes            bool
}

func newCmdInvitationRevoke(f *Factory, runF func(*invitationRevokeOptions) error) *cobra.Command {
	opts := &invitationRevokeOptions{f: f}
	cmd := &cobra.Command{
		Use:   "revoke ORGANIZATION_ID INVITATION_ID",
		Short: "Revoke an invitation (revoking a used or revoked one changes nothing)",
		Long: `Revoke a pending invitation: its link stops working. On a terminal it asks first;
elsewhere it needs --yes.`,
		Args: positional("ORGANIZATION_ID", "INVITATION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID, opts.InvitationID = args[0], args[1]
			if err := f.needConfirmation(opts.Yes, "revoking "+opts.InvitationID); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return invitationRevokeRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	cmd.Flags().BoolVar(&opts.Yes, "yes", false, "revoke without asking")
	return cmd
}

func invitationRevokeRun(ctx context.Context, opts *invitationRevokeOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	if !opts.Yes {
		r, err := c.GetInvitationWithResponse(ctx, opts.OrganizationID, opts.InvitationID)
		if err := check(r, err); err != nil {
			return err
		}
		inv := r.JSON200
		if err := f.confirmYes(fmt.Sprintf("Revoke invitation %s of %s (%s)? Its link stops working.", inv.Id, inv.Email, inv.State)); err != nil {
			return err
		}
	}
	key := optionalIdempotencyKey(opts.IdempotencyKey)
	p := &client.RevokeInvitationParams{IdempotencyKey: key}
	r, err := c.RevokeInvitationWithResponse(ctx, opts.OrganizationID, opts.InvitationID, p)
	if err := f.checkKeyed(key, r, err); err != nil {
		return err
	}
	return f.printInvitation(r.Body, r.JSON200)
}
