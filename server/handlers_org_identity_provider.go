package server

import (
	"context"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
)

// orgProviderJSON is an organization's provider as the owners' API shows it: never with its
// client secret.
func orgProviderJSON(p domain.OrganizationProvider) api.OrganizationIdentityProvider {
	return api.OrganizationIdentityProvider{Id: p.ID, OrganizationId: p.OrganizationID, Slug: p.Slug,
		Protocol: p.Protocol, Issuer: p.Issuer, DisplayName: p.DisplayName, ClientId: p.ClientID,
		Scopes: p.Scopes, AllowedEmailDomains: p.AllowedEmailDomains, HasClientSecret: p.HasClientSecret,
		State: p.State, DisabledReason: p.DisabledReason, DisabledAt: utc(p.DisabledAt),
		CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC()}
}

// ListOrganizationIdentityProviders lists the caller's organization's own providers.
func (s *Server) ListOrganizationIdentityProviders(ctx context.Context, req api.ListOrganizationIdentityProvidersRequestObject) (api.ListOrganizationIdentityProvidersResponseObject, error) {
	st := pipeline.From(ctx)
	after, err := optionalPageToken(req.Params.PageToken, "oip")
	if err != nil {
		return nil, err
	}
	size := pageSize(req.Params.PageSize)
	ps, err := domain.ListOrganizationProviders(ctx, s.q(ctx), st.Actor.OrganizationID, after, size+1)
	if err != nil {
		return nil, err
	}
	out := api.OrganizationIdentityProviderList{Items: []api.OrganizationIdentityProvider{}}
	ps, out.NextPageToken = page(ps, size, func(p domain.OrganizationProvider) string { return p.ID })
	for _, p := range ps {
		out.Items = append(out.Items, orgProviderJSON(p))
	}
	return api.ListOrganizationIdentityProviders200JSONResponse{Body: out}, nil
}

// CreateOrganizationIdentityProvider adds a provider of the organization's own (entitlement
// organization_identity_providers).
func (s *Server) CreateOrganizationIdentityProvider(ctx context.Context, req api.CreateOrganizationIdentityProviderRequestObject) (api.CreateOrganizationIdentityProviderResponseObject, error) {
	st := pipeline.From(ctx)
	b := req.Body
	in := domain.NewProvider{Slug: b.Slug, Protocol: string(b.Protocol), Issuer: b.Issuer,
		ProviderConfig: providerConfig(b.DisplayName, b.ClientId, b.Scopes, b.AllowedEmailDomains)}
	changed := []string{"identity_providers"}
	if b.ClientSecret != nil {
		in.ClientSecret = b.ClientSecret.Value
	}
	p, err := domain.CreateOrganizationProvider(ctx, s.q(ctx), s.cfg.Secrets, st.Actor.OrganizationID, in, s.cfg.PolicyDefaults)
	if err != nil {
		return nil, err
	}
	st.Audit.OwnOrganization(st.Actor, changed)
	return api.CreateOrganizationIdentityProvider201JSONResponse{Body: orgProviderJSON(p)}, nil
}

// DisableOrganizationIdentityProvider disables one of the organization's providers
// (target-state idempotent).
func (s *Server) DisableOrganizationIdentityProvider(ctx context.Context, req api.DisableOrganizationIdentityProviderRequestObject) (api.DisableOrganizationIdentityProviderResponseObject, error) {
	st := pipeline.From(ctx)
	p, changed, err := domain.DisableOrganizationProvider(ctx, s.q(ctx), st.Actor.OrganizationID, req.OrgProviderId)
	if err != nil {
		return nil, err
	}
	var fields []string
	if changed {
		fields = []string{"identity_providers"}
	}
	st.Audit.OwnOrganization(st.Actor, fields)
	return api.DisableOrganizationIdentityProvider200JSONResponse{Body: orgProviderJSON(p)}, nil
}
