package server

import (
	openapi_types "github.com/oapi-codegen/runtime/types"

	"context"
	"fmt"
	"strings"
	"time"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
)

func invitationJSON(i domain.Invitation) api.Invitation {
	return api.Invitation{Id: i.ID, OrganizationId: i.OrganizationID, Email: openapi_types.Email(i.Email),
		State: i.State, CreatedAt: i.CreatedAt.UTC(), ExpiresAt: i.ExpiresAt.UTC(),
		AcceptedAt: utc(i.AcceptedAt), RevokedAt: utc(i.RevokedAt)}
}

// ListInvitations pages through an organization's invitations.
func (s *Server) ListInvitations(ctx context.Context, req api.ListInvitationsRequestObject) (api.ListInvitationsResponseObject, error) {
	if _, err := domain.GetOrganization(ctx, s.q(ctx), req.OrganizationId); err != nil {
		return nil, err
	}
	before, err := optionalPageToken(req.Params.PageToken, "inv")
	if err != nil {
		return nil, err
	}
	state := ""
	if req.Params.State != nil {
		state = string(*req.Params.State)
	}
	size := pageSize(req.Params.PageSize)
	invs, err := domain.ListInvitations(ctx, s.q(ctx), req.OrganizationId, state, before, size+1)
	if err != nil {
		return nil, err
	}
	out := api.InvitationList{Items: []api.Invitation{}}
	invs, out.NextPageToken = page(invs, size, func(i domain.Invitation) string { return i.ID })
	for _, i := range invs {
		out.Items = append(out.Items, invitationJSON(i))
	}
	return api.ListInvitations200JSONResponse{Body: out}, nil
}

// CreateInvitation invites an owner; the mail is queued in the same transaction.
func (s *Server) CreateInvitation(ctx context.Context, req api.CreateInvitationRequestObject) (api.CreateInvitationResponseObject, error) {
	q := s.q(ctx)
	inv, secret, err := domain.CreateInvitation(ctx, q, req.OrganizationId, string(req.Body.Email))
	if err != nil {
		return nil, err
	}
	o, err := domain.GetOrganization(ctx, q, req.OrganizationId)
	if err != nil {
		return nil, err
	}
	st := pipeline.From(ctx)
	st.Audit.Target(o, []string{"invitation"})
	subject, body := invitationMail(s.cfg.PublicURL, o, inv, secret)
	mailID, err := domain.QueueMail(ctx, q, &o.ID, inv.Email, subject, body)
	if err != nil {
		return nil, err
	}
	if st.Tx == nil {
		return nil, fmt.Errorf("createInvitation outside the mutation transaction")
	}
	if _, err := s.jobs.InsertTx(ctx, st.Tx, MailArgs{MailID: mailID}, nil); err != nil {
		return nil, fmt.Errorf("queue invitation mail: %w", err)
	}
	loc := fmt.Sprintf("/api/v1/operator/organizations/%s/invitations/%s", o.ID, inv.ID)
	return api.CreateInvitation201JSONResponse{Body: invitationJSON(inv), Headers: api.CreateInvitation201ResponseHeaders{Location: &loc}}, nil
}

func invitationMail(publicURL string, o domain.Organization, inv domain.Invitation, secret string) (string, string) {
	subject := fmt.Sprintf("You are invited to own %s on Renga", o.DisplayName)
	var b strings.Builder
	fmt.Fprintf(&b, "You are invited to be an owner of the organization %q (%s) on the Renga deployment at %s.\r\n\r\n", o.DisplayName, o.Slug, publicURL)
	fmt.Fprintf(&b, "Accept the invitation before %s:\r\n\r\n    %s/invitations/accept#token=%s\r\n\r\n", inv.ExpiresAt.UTC().Format(time.RFC1123), publicURL, secret)
	fmt.Fprintf(&b, "or with the renga command (it reads the token from stdin):\r\n\r\n")
	fmt.Fprintf(&b, "    echo %s | RENGA_URL=%s renga owner accept --display-name \"Your Name\"\r\n\r\n", secret, publicURL)
	fmt.Fprintf(&b, "or with the API:\r\n\r\n    curl -X POST %s/api/v1/invitations/accept -H 'Content-Type: application/json' \\\r\n", publicURL)
	fmt.Fprintf(&b, "      -d '{\"token\": \"%s\", \"display_name\": \"Your Name\"}'\r\n\r\n", secret)
	b.WriteString("Accepting gives you a personal API key for the organization's API, shown once.\r\n")
	b.WriteString("If you did not expect this invitation, ignore this mail; it expires by itself.\r\n")
	return subject, b.String()
}

// GetInvitation reads an invitation.
func (s *Server) GetInvitation(ctx context.Context, req api.GetInvitationRequestObject) (api.GetInvitationResponseObject, error) {
	inv, err := domain.GetInvitation(ctx, s.q(ctx), req.OrganizationId, req.InvitationId)
	if err != nil {
		return nil, err
	}
	return api.GetInvitation200JSONResponse{Body: invitationJSON(inv)}, nil
}

// RevokeInvitation revokes a pending invitation (idempotent).
func (s *Server) RevokeInvitation(ctx context.Context, req api.RevokeInvitationRequestObject) (api.RevokeInvitationResponseObject, error) {
	inv, changed, err := domain.RevokeInvitation(ctx, s.q(ctx), req.OrganizationId, req.InvitationId)
	if err != nil {
		return nil, err
	}
	o, err := domain.GetOrganization(ctx, s.q(ctx), req.OrganizationId)
	if err != nil {
		return nil, err
	}
	pipeline.From(ctx).Audit.Target(o, changed)
	return api.RevokeInvitation200JSONResponse{Body: invitationJSON(inv)}, nil
}

// AcceptInvitation redeems an invitation and returns the new owner's API key, once. The new
// owner is the actor of the change, so it appears in the organization's Activity as theirs.
func (s *Server) AcceptInvitation(ctx context.Context, req api.AcceptInvitationRequestObject) (api.AcceptInvitationResponseObject, error) {
	a, err := domain.AcceptInvitation(ctx, s.q(ctx), req.Body.Token, req.Body.DisplayName, s.cfg.PolicyDefaults)
	if err != nil {
		return nil, err
	}
	st := pipeline.From(ctx)
	st.Actor = pipeline.Actor{Type: domain.ActorUser, ID: a.User.ID, Name: a.User.DisplayName, CredentialID: a.APIKeyID,
		OrganizationID: a.Organization.ID, OrganizationState: a.Organization.State, Role: "owner"}
	st.Audit.Target(a.Organization, []string{"invitation"})
	if a.Joined {
		st.Audit.ChangedFields = append(st.Audit.ChangedFields, "owners")
	}
	return api.AcceptInvitation201JSONResponse{Body: api.InvitationAccepted{User: userJSON(a.User), Organization: orgSummary(a.Organization), ApiKey: a.APIKey}}, nil
}
