package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	openapi_types "github.com/oapi-codegen/runtime/types"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/problem"
)

// SuspendOrganization suspends an organization (target-state idempotent).
func (s *Server) SuspendOrganization(ctx context.Context, req api.SuspendOrganizationRequestObject) (api.SuspendOrganizationResponseObject, error) {
	o, changed, err := domain.SuspendOrganization(ctx, s.q(ctx), req.OrganizationId, req.Body.Reason)
	if err != nil {
		return nil, err
	}
	noteOrg(ctx, o, changed)
	return api.SuspendOrganization200JSONResponse{Body: orgJSON(o), Headers: api.SuspendOrganization200ResponseHeaders{ETag: etag(o.Version)}}, nil
}

// ResumeOrganization makes an organization active (target-state idempotent).
func (s *Server) ResumeOrganization(ctx context.Context, req api.ResumeOrganizationRequestObject) (api.ResumeOrganizationResponseObject, error) {
	o, changed, err := domain.ResumeOrganization(ctx, s.q(ctx), req.OrganizationId)
	if err != nil {
		return nil, err
	}
	noteOrg(ctx, o, changed)
	return api.ResumeOrganization200JSONResponse{Body: orgJSON(o), Headers: api.ResumeOrganization200ResponseHeaders{ETag: etag(o.Version)}}, nil
}

// ScheduleOrganizationDeletion schedules the purge (target-state idempotent).
func (s *Server) ScheduleOrganizationDeletion(ctx context.Context, req api.ScheduleOrganizationDeletionRequestObject) (api.ScheduleOrganizationDeletionResponseObject, error) {
	o, changed, err := domain.ScheduleDeletion(ctx, s.q(ctx), req.OrganizationId, s.cfg.DeletionGracePeriod)
	if err != nil {
		return nil, err
	}
	noteOrg(ctx, o, changed)
	return api.ScheduleOrganizationDeletion200JSONResponse{Body: orgJSON(o),
		Headers: api.ScheduleOrganizationDeletion200ResponseHeaders{ETag: etag(o.Version)}}, nil
}

// CancelOrganizationDeletion cancels a scheduled deletion (target-state idempotent).
func (s *Server) CancelOrganizationDeletion(ctx context.Context, req api.CancelOrganizationDeletionRequestObject) (api.CancelOrganizationDeletionResponseObject, error) {
	o, changed, err := domain.CancelDeletion(ctx, s.q(ctx), req.OrganizationId)
	if err != nil {
		return nil, err
	}
	noteOrg(ctx, o, changed)
	return api.CancelOrganizationDeletion200JSONResponse{Body: orgJSON(o),
		Headers: api.CancelOrganizationDeletion200ResponseHeaders{ETag: etag(o.Version)}}, nil
}

func noteOrg(ctx context.Context, o domain.Organization, changed []string) {
	st := stateFrom(ctx)
	st.Audit.Target(o)
	st.Audit.ChangedFields = changed
}

// ListOrganizationOwners pages through an organization's owners.
func (s *Server) ListOrganizationOwners(ctx context.Context, req api.ListOrganizationOwnersRequestObject) (api.ListOrganizationOwnersResponseObject, error) {
	if _, err := domain.GetOrganization(ctx, s.q(ctx), req.OrganizationId); err != nil {
		return nil, err
	}
	after, err := optionalPageToken(req.Params.PageToken, "usr")
	if err != nil {
		return nil, err
	}
	size := pageSize(req.Params.PageSize)
	owners, err := domain.ListOwners(ctx, s.q(ctx), req.OrganizationId, after, size+1)
	if err != nil {
		return nil, err
	}
	out := api.OwnerList{Items: []api.Owner{}}
	owners, out.NextPageToken = page(owners, size, func(o domain.Owner) string { return o.UserID })
	for _, o := range owners {
		out.Items = append(out.Items, api.Owner{UserId: o.UserID, Email: openapi_types.Email(o.Email), DisplayName: o.DisplayName, Since: o.Since.UTC()})
	}
	return api.ListOrganizationOwners200JSONResponse(out), nil
}

func optionalPageToken(tok *string, prefix string) (string, error) {
	if tok == nil {
		return "", nil
	}
	return decodePageToken(*tok, prefix)
}

func invitationJSON(i domain.Invitation) api.Invitation {
	return api.Invitation{Id: i.ID, OrganizationId: i.OrganizationID, Email: openapi_types.Email(i.Email),
		State: api.InvitationState(i.State), CreatedAt: i.CreatedAt.UTC(), ExpiresAt: i.ExpiresAt.UTC(),
		AcceptedAt: utc(i.AcceptedAt), RevokedAt: utc(i.RevokedAt)}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
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
	return api.ListInvitations200JSONResponse(out), nil
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
	st := stateFrom(ctx)
	st.Audit.Target(o)
	st.Audit.ChangedFields = []string{"invitation"}
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
	return api.GetInvitation200JSONResponse(invitationJSON(inv)), nil
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
	noteOrg(ctx, o, changed)
	return api.RevokeInvitation200JSONResponse{Body: invitationJSON(inv)}, nil
}

// convert maps between generated and domain types of the same JSON shape.
func convert[T any](v any) (T, error) {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		return out, err
	}
	return out, json.Unmarshal(b, &out)
}

func policyJSON(p domain.Policy) (api.Policy, error) {
	out, err := convert[api.Policy](p.Document)
	out.OrganizationId, out.Version = p.OrganizationID, p.Version
	return out, err
}

// GetPolicy reads an organization's policy document.
func (s *Server) GetPolicy(ctx context.Context, req api.GetPolicyRequestObject) (api.GetPolicyResponseObject, error) {
	p, err := domain.GetPolicy(ctx, s.q(ctx), req.OrganizationId)
	if err != nil {
		return nil, err
	}
	out, err := policyJSON(p)
	if err != nil {
		return nil, err
	}
	return api.GetPolicy200JSONResponse{Body: out, Headers: api.GetPolicy200ResponseHeaders{ETag: etag(p.Version)}}, nil
}

// PutPolicy replaces an organization's policy document, guarded by If-Match.
func (s *Server) PutPolicy(ctx context.Context, req api.PutPolicyRequestObject) (api.PutPolicyResponseObject, error) {
	q := s.q(ctx)
	o, err := domain.GetOrganization(ctx, q, req.OrganizationId)
	if err != nil {
		return nil, err
	}
	doc, err := convert[domain.PolicyDocument](req.Body)
	if err != nil {
		return nil, err
	}
	st := stateFrom(ctx)
	p, changed, err := domain.PutPolicy(ctx, q, o.ID, st.IfMatch, doc, s.cfg.PolicyDefaults)
	if err != nil {
		return nil, err
	}
	noteOrg(ctx, o, changed)
	out, err := policyJSON(p)
	if err != nil {
		return nil, err
	}
	return api.PutPolicy200JSONResponse{Body: out, Headers: api.PutPolicy200ResponseHeaders{ETag: etag(p.Version)}}, nil
}

// effective computes what is in force for an organization.
func (s *Server) effective(ctx context.Context, orgID string) (domain.EffectivePolicy, error) {
	q := s.q(ctx)
	p, err := domain.GetPolicy(ctx, q, orgID)
	if err != nil {
		return domain.EffectivePolicy{}, err
	}
	set, err := domain.GetSettings(ctx, q, orgID)
	if err != nil {
		return domain.EffectivePolicy{}, err
	}
	return domain.Effective(p.Document, s.cfg.PolicyDefaults, set.Settings), nil
}

// GetEffectivePolicy reports each value in force and its source.
func (s *Server) GetEffectivePolicy(ctx context.Context, req api.GetEffectivePolicyRequestObject) (api.GetEffectivePolicyResponseObject, error) {
	e, err := s.effective(ctx, req.OrganizationId)
	if err != nil {
		return nil, err
	}
	i := func(v domain.Value[int64]) api.EffectiveInteger {
		return api.EffectiveInteger{Value: v.Value, Source: api.PolicySource(v.Source)}
	}
	b := func(v domain.Value[bool]) api.EffectiveBoolean {
		return api.EffectiveBoolean{Value: v.Value, Source: api.PolicySource(v.Source)}
	}
	out := api.EffectivePolicy{OrganizationId: req.OrganizationId}
	out.Limits.MaxAgents = i(e.Limits.MaxAgents)
	out.Limits.MaxUsers = i(e.Limits.MaxUsers)
	out.Limits.IntakeBytesPerDay = i(e.Limits.IntakeBytesPerDay)
	out.Limits.ObservationRetentionDays = i(e.Limits.ObservationRetentionDays)
	out.Limits.MaxJobsPerDay = i(e.Limits.MaxJobsPerDay)
	out.Entitlements.OrganizationIdentityProviders = b(e.Entitlements.OrganizationIdentityProviders)
	out.Entitlements.Jobs = b(e.Entitlements.Jobs)
	out.Entitlements.OwnerExport = b(e.Entitlements.OwnerExport)
	out.Settings.RequireSso = b(e.Settings.RequireSSO)
	out.Settings.RequireMfa = b(e.Settings.RequireMFA)
	out.Settings.SessionMaxAgeHours = i(e.Settings.SessionMaxAgeHours)
	out.Settings.AllowedEmailDomains = api.EffectiveStrings{Value: e.Settings.AllowedEmailDomains.Value,
		Source: api.PolicySource(e.Settings.AllowedEmailDomains.Source)}
	if out.Settings.AllowedEmailDomains.Value == nil {
		out.Settings.AllowedEmailDomains.Value = []string{}
	}
	return api.GetEffectivePolicy200JSONResponse(out), nil
}

// usageRange checks a from..to range of days.
func usageRange(from, to openapi_types.Date) (time.Time, time.Time, error) {
	f, t := from.UTC(), to.UTC()
	if f.Year() < 1 || t.Year() > 9999 {
		pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "Dates must be between 0001-01-01 and 9999-12-31.")
		pe.Errors = []problem.FieldError{{Field: "from", Message: "a date from year 1 to 9999"}}
		return f, t, pe
	}
	if t.Before(f) {
		pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "to is before from.")
		pe.Errors = []problem.FieldError{{Field: "to", Message: "must not be before from"}}
		return f, t, pe
	}
	if t.Sub(f) > (domain.UsageRetentionDays-1)*24*time.Hour {
		pe := problem.Newf(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "A range covers at most %d days.", domain.UsageRetentionDays)
		pe.Errors = []problem.FieldError{{Field: "to", Message: fmt.Sprintf("at most %d days after from", domain.UsageRetentionDays-1)}}
		return f, t, pe
	}
	return f, t, nil
}

// GetOrganizationUsage returns an organization's daily usage.
func (s *Server) GetOrganizationUsage(ctx context.Context, req api.GetOrganizationUsageRequestObject) (api.GetOrganizationUsageResponseObject, error) {
	from, to, err := usageRange(req.Params.From, req.Params.To)
	if err != nil {
		return nil, err
	}
	if _, err := domain.GetOrganization(ctx, s.q(ctx), req.OrganizationId); err != nil {
		return nil, err
	}
	days, err := domain.DailyUsage(ctx, s.q(ctx), req.OrganizationId, from, to)
	if err != nil {
		return nil, err
	}
	out := api.OrganizationUsage{OrganizationId: req.OrganizationId, From: req.Params.From, To: req.Params.To, Days: []api.UsageDay{}}
	for _, d := range days {
		out.Days = append(out.Days, api.UsageDay{Day: openapi_types.Date{Time: d.Day}, IntakeRequests: d.IntakeRequests,
			IntakeBytes: d.IntakeBytes, JobsCreated: d.JobsCreated, TerminalMinutes: d.TerminalMinutes()})
	}
	return api.GetOrganizationUsage200JSONResponse(out), nil
}

// ListUsage returns per-organization totals over a range.
func (s *Server) ListUsage(ctx context.Context, req api.ListUsageRequestObject) (api.ListUsageResponseObject, error) {
	from, to, err := usageRange(req.Params.From, req.Params.To)
	if err != nil {
		return nil, err
	}
	after, err := optionalPageToken(req.Params.PageToken, "org")
	if err != nil {
		return nil, err
	}
	size := pageSize(req.Params.PageSize)
	totals, err := domain.UsageTotals(ctx, s.q(ctx), from, to, after, size+1)
	if err != nil {
		return nil, err
	}
	out := api.UsageTotalsList{From: req.Params.From, To: req.Params.To, Items: []api.UsageTotals{}}
	totals, out.NextPageToken = page(totals, size, func(t domain.UsageTotal) string { return t.OrganizationID })
	for _, t := range totals {
		out.Items = append(out.Items, api.UsageTotals{OrganizationId: t.OrganizationID, IntakeRequests: t.IntakeRequests,
			IntakeBytes: t.IntakeBytes, JobsCreated: t.JobsCreated, TerminalMinutes: t.TerminalMinutes})
	}
	return api.ListUsage200JSONResponse(out), nil
}
