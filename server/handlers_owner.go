package server

import (
	"context"

	openapi_types "github.com/oapi-codegen/runtime/types"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
)

func orgSummary(o domain.Organization) api.OrgSummary {
	return api.OrgSummary{Id: o.ID, Slug: o.Slug, DisplayName: o.DisplayName, State: api.OrganizationState(o.State),
		SuspendedReason: o.SuspendedReason}
}

func userJSON(u domain.User) api.User {
	return api.User{Id: u.ID, Email: openapi_types.Email(u.Email), DisplayName: u.DisplayName}
}

// AcceptInvitation redeems an invitation and returns the new owner's API key, once. The new
// owner is the actor of the change, so it appears in the organization's Activity as theirs.
func (s *Server) AcceptInvitation(ctx context.Context, req api.AcceptInvitationRequestObject) (api.AcceptInvitationResponseObject, error) {
	a, err := domain.AcceptInvitation(ctx, s.q(ctx), req.Body.Token, req.Body.DisplayName, s.cfg.PolicyDefaults)
	if err != nil {
		return nil, err
	}
	st := stateFrom(ctx)
	st.Actor = Actor{Type: domain.ActorUser, ID: a.User.ID, Name: a.User.DisplayName, CredentialID: a.APIKeyID,
		OrganizationID: a.Organization.ID, OrganizationState: a.Organization.State, Role: "owner"}
	st.Audit.Target(a.Organization)
	st.Audit.ChangedFields = []string{"invitation"}
	if a.Joined {
		st.Audit.ChangedFields = append(st.Audit.ChangedFields, "owners")
	}
	return api.AcceptInvitation201JSONResponse{User: userJSON(a.User), Organization: orgSummary(a.Organization), ApiKey: a.APIKey}, nil
}

// GetMe describes the calling user and their organization.
func (s *Server) GetMe(ctx context.Context, _ api.GetMeRequestObject) (api.GetMeResponseObject, error) {
	h, err := s.holder(ctx)
	if err != nil {
		return nil, err
	}
	return api.GetMe200JSONResponse{User: userJSON(h.User), Organization: orgSummary(h.Organization), Role: api.MeRole(h.Role)}, nil
}

// holder reads the caller's user and organization as they are now.
func (s *Server) holder(ctx context.Context) (domain.KeyHolder, error) {
	st := stateFrom(ctx)
	var h domain.KeyHolder
	var err error
	if h.Organization, err = domain.GetOrganization(ctx, s.q(ctx), st.Actor.OrganizationID); err != nil {
		return h, err
	}
	if h.User, err = domain.GetUser(ctx, s.q(ctx), st.Actor.ID); err != nil {
		return h, err
	}
	h.Role = st.Actor.Role
	return h, nil
}

// ListActivity pages through the caller's organization's Activity.
func (s *Server) ListActivity(ctx context.Context, req api.ListActivityRequestObject) (api.ListActivityResponseObject, error) {
	st := stateFrom(ctx)
	before, err := optionalPageToken(req.Params.PageToken, "act")
	if err != nil {
		return nil, err
	}
	size := pageSize(req.Params.PageSize)
	acts, err := domain.ListActivity(ctx, s.q(ctx), st.Actor.OrganizationID, before, size+1)
	if err != nil {
		return nil, err
	}
	out := api.ActivityList{Items: []api.Activity{}}
	acts, out.NextPageToken = page(acts, size, func(a domain.Activity) string { return a.ID })
	for _, a := range acts {
		out.Items = append(out.Items, api.Activity{Id: a.ID, Time: a.Time.UTC(), RequestId: a.RequestID, Operation: a.Operation,
			ChangedFields: a.ChangedFields, Actor: api.ActivityActor{Type: api.ActivityActorType(a.ActorType), Id: a.ActorID,
				NameSnapshot: a.ActorName, InvocationId: a.InvocationID}})
	}
	return api.ListActivity200JSONResponse(out), nil
}

func (s *Server) settingsJSON(ctx context.Context, orgID string, d domain.SettingsDocument) (api.Settings, error) {
	e, err := s.effective(ctx, orgID)
	if err != nil {
		return api.Settings{}, err
	}
	locked, err := convert[api.LockedSettings](e.Locks())
	return api.Settings{RequireSso: d.Settings.RequireSSO, RequireMfa: d.Settings.RequireMFA,
		SessionMaxAgeHours: d.Settings.SessionMaxAgeHours, AllowedEmailDomains: d.Settings.AllowedEmailDomains,
		Locked: locked, Version: d.Version}, err
}

// GetSettings reads the owners' security settings and what the policy locks.
func (s *Server) GetSettings(ctx context.Context, _ api.GetSettingsRequestObject) (api.GetSettingsResponseObject, error) {
	orgID := stateFrom(ctx).Actor.OrganizationID
	d, err := domain.GetSettings(ctx, s.q(ctx), orgID)
	if err != nil {
		return nil, err
	}
	out, err := s.settingsJSON(ctx, orgID, d)
	if err != nil {
		return nil, err
	}
	return api.GetSettings200JSONResponse{Body: out, Headers: api.GetSettings200ResponseHeaders{ETag: etag(d.Version)}}, nil
}

// PutSettings replaces the owners' settings, refusing locked ones, guarded by If-Match.
func (s *Server) PutSettings(ctx context.Context, req api.PutSettingsRequestObject) (api.PutSettingsResponseObject, error) {
	st := stateFrom(ctx)
	orgID := st.Actor.OrganizationID
	e, err := s.effective(ctx, orgID)
	if err != nil {
		return nil, err
	}
	w := domain.SettingsWrite{RequireSSO: req.Body.RequireSso, RequireMFA: req.Body.RequireMfa,
		SessionMaxAgeHours: req.Body.SessionMaxAgeHours, AllowedEmailDomains: req.Body.AllowedEmailDomains}
	d, changed, err := domain.PutSettings(ctx, s.q(ctx), orgID, st.IfMatch, w, e.Locks())
	if err != nil {
		return nil, err
	}
	st.Audit.OwnOrganization(st.Actor, changed)
	out, err := s.settingsJSON(ctx, orgID, d)
	if err != nil {
		return nil, err
	}
	return api.PutSettings200JSONResponse{Body: out, Headers: api.PutSettings200ResponseHeaders{ETag: etag(d.Version)}}, nil
}
