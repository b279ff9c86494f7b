package server

import (
	openapi_types "github.com/oapi-codegen/runtime/types"

	"context"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
)

func orgSummary(o domain.Organization) api.OrgSummary {
	return api.OrgSummary{Id: o.ID, Slug: o.Slug, DisplayName: o.DisplayName, State: o.State,
		SuspendedReason: o.SuspendedReason}
}

func userJSON(u domain.User) api.User {
	return api.User{Id: u.ID, Email: openapi_types.Email(u.Email), DisplayName: u.DisplayName}
}

// GetMe describes the calling user and their organization.
func (s *Server) GetMe(ctx context.Context, _ api.GetMeRequestObject) (api.GetMeResponseObject, error) {
	h, err := s.holder(ctx)
	if err != nil {
		return nil, err
	}
	return api.GetMe200JSONResponse{Body: api.Me{User: userJSON(h.User), Organization: orgSummary(h.Organization), Role: h.Role}}, nil
}

// holder reads the caller's user and organization as they are now.
func (s *Server) holder(ctx context.Context) (domain.KeyHolder, error) {
	st := pipeline.From(ctx)
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
