package server

import (
	"context"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
)

func supportSourceJSON(s domain.SupportSource) api.SupportSource {
	emails := make([]api.Email, 0, len(s.AllowedEmails))
	for _, e := range s.AllowedEmails {
		emails = append(emails, api.Email(e))
	}
	return api.SupportSource{Enabled: s.Enabled, ProviderId: s.ProviderID, AllowedEmails: emails,
		AllowedEmailDomain: s.AllowedEmailDomain, Version: s.Version, UpdatedAt: s.UpdatedAt.UTC()}
}

// GetSupportSource reads who the operator's support people are.
func (s *Server) GetSupportSource(ctx context.Context, _ api.GetSupportSourceRequestObject) (api.GetSupportSourceResponseObject, error) {
	src, err := domain.GetSupportSource(ctx, s.q(ctx))
	if err != nil {
		return nil, err
	}
	return api.GetSupportSource200JSONResponse{Body: supportSourceJSON(src),
		Headers: api.GetSupportSource200ResponseHeaders{ETag: etag(src.Version)}}, nil
}

// PutSupportSource replaces the support source, guarded by If-Match. It names people; it
// never touches an organization's grant.
func (s *Server) PutSupportSource(ctx context.Context, req api.PutSupportSourceRequestObject) (api.PutSupportSourceResponseObject, error) {
	st := pipeline.From(ctx)
	b := req.Body
	w := domain.SupportSourceWrite{ProviderID: b.ProviderId, AllowedEmailDomain: b.AllowedEmailDomain}
	if b.Enabled != nil {
		w.Enabled = *b.Enabled
	}
	if b.AllowedEmails != nil {
		for _, e := range *b.AllowedEmails {
			w.AllowedEmails = append(w.AllowedEmails, string(e))
		}
	}
	src, changed, err := s.providers().PutSupportSource(ctx, s.q(ctx), st.IfMatch, w)
	if err != nil {
		return nil, err
	}
	if src.ProviderID != nil {
		st.Audit.ProviderID = *src.ProviderID
	}
	st.Audit.ChangedFields = changed
	return api.PutSupportSource200JSONResponse{Body: supportSourceJSON(src),
		Headers: api.PutSupportSource200ResponseHeaders{ETag: etag(src.Version)}}, nil
}

func supportGrantJSON(g domain.SupportGrant) api.SupportGrant {
	return api.SupportGrant{Id: g.ID, OrganizationId: g.OrganizationID, State: g.State,
		SupportEmail: g.SupportEmail, GrantedBy: api.SupportGrantor{UserId: g.GrantedBy, Email: api.Email(g.GrantedByEmail)},
		GrantedAt: g.GrantedAt.UTC(), ExpiresAt: g.ExpiresAt.UTC(), RevokedAt: utc(g.RevokedAt)}
}

func (s *Server) supportGrantList(ctx context.Context, orgID string, size *api.PageSize, token *api.PageToken) (api.SupportGrantList, error) {
	before, err := optionalPageToken(token, "grt")
	if err != nil {
		return api.SupportGrantList{}, err
	}
	n := pageSize(size)
	grants, err := domain.ListSupportGrants(ctx, s.q(ctx), orgID, before, n+1)
	if err != nil {
		return api.SupportGrantList{}, err
	}
	out := api.SupportGrantList{Items: []api.SupportGrant{}}
	grants, out.NextPageToken = page(grants, n, func(g domain.SupportGrant) string { return g.ID })
	for _, g := range grants {
		out.Items = append(out.Items, supportGrantJSON(g))
	}
	return out, nil
}

// GetSupportAccess lists the grants an organization's owners made: metadata only.
func (s *Server) GetSupportAccess(ctx context.Context, req api.GetSupportAccessRequestObject) (api.GetSupportAccessResponseObject, error) {
	if _, err := domain.GetOrganization(ctx, s.q(ctx), req.OrganizationId); err != nil {
		return nil, err
	}
	out, err := s.supportGrantList(ctx, req.OrganizationId, req.Params.PageSize, req.Params.PageToken)
	if err != nil {
		return nil, err
	}
	return api.GetSupportAccess200JSONResponse{Body: out}, nil
}

// ListSupportGrants lists the caller's organization's grants, for every owner to see.
func (s *Server) ListSupportGrants(ctx context.Context, req api.ListSupportGrantsRequestObject) (api.ListSupportGrantsResponseObject, error) {
	out, err := s.supportGrantList(ctx, pipeline.From(ctx).Actor.OrganizationID, req.Params.PageSize, req.Params.PageToken)
	if err != nil {
		return nil, err
	}
	return api.ListSupportGrants200JSONResponse{Body: out}, nil
}

// CreateSupportGrant lets the deployment's support people (or one of them) read the
// organization until the grant expires.
func (s *Server) CreateSupportGrant(ctx context.Context, req api.CreateSupportGrantRequestObject) (api.CreateSupportGrantResponseObject, error) {
	st := pipeline.From(ctx)
	var email *string
	if req.Body.SupportEmail != nil {
		e := string(*req.Body.SupportEmail)
		email = &e
	}
	g, err := domain.CreateSupportGrant(ctx, s.q(ctx), st.Actor.OrganizationID, st.Actor.ID, req.Body.ExpiresAt, email)
	if err != nil {
		return nil, err
	}
	st.Audit.OwnOrganization(st.Actor, []string{"support_grants"})
	loc := "/api/v1/org/support-grants/" + g.ID
	return api.CreateSupportGrant201JSONResponse{Body: supportGrantJSON(g),
		Headers: api.CreateSupportGrant201ResponseHeaders{Location: &loc}}, nil
}

// RevokeSupportGrant ends a grant now (idempotent).
func (s *Server) RevokeSupportGrant(ctx context.Context, req api.RevokeSupportGrantRequestObject) (api.RevokeSupportGrantResponseObject, error) {
	st := pipeline.From(ctx)
	g, changed, err := domain.RevokeSupportGrant(ctx, s.q(ctx), st.Actor.OrganizationID, req.GrantId, st.Actor.ID)
	if err != nil {
		return nil, err
	}
	var fields []string
	if changed {
		fields = []string{"support_grants"}
	}
	st.Audit.OwnOrganization(st.Actor, fields)
	return api.RevokeSupportGrant200JSONResponse{Body: supportGrantJSON(g)}, nil
}
