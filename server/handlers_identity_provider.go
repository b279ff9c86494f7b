package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
	"renga.dev/renga/server/problem"
)

func (s *Server) providers() domain.Providers {
	return domain.Providers{Env: s.cfg.IdentityProviders, Secrets: s.cfg.Secrets}
}

// providerJSON is a provider as the API shows it: never with its client secret.
func providerJSON(p domain.IdentityProvider) api.IdentityProvider {
	return api.IdentityProvider{Id: p.ID, Slug: p.Slug, Protocol: p.Protocol, Issuer: p.Issuer,
		Source: p.Source, State: p.State,
		DisplayName: p.DisplayName, ClientId: p.ClientID, Scopes: p.Scopes, AllowedEmailDomains: p.AllowedEmailDomains,
		Revision: p.Revision, ActiveRevision: p.ActiveRevision, PendingRevision: p.PendingRevision,
		Version: p.Version, CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC()}
}

var providerSlugToken = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,39}$`)

// Providers list by slug, so their page token carries the last slug.
func decodeSlugPageToken(tok string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	slug, ok := strings.CutPrefix(string(b), "v1:slug:")
	if err != nil || !ok || !providerSlugToken.MatchString(slug) {
		return "", problem.New(http.StatusBadRequest, api.ErrorCodeInvalidPageToken,
			"page_token is not one this list returned; start again without it.")
	}
	return slug, nil
}

// ListIdentityProviders pages through the deployment's providers by slug.
func (s *Server) ListIdentityProviders(ctx context.Context, req api.ListIdentityProvidersRequestObject) (api.ListIdentityProvidersResponseObject, error) {
	size := pageSize(req.Params.PageSize)
	after := ""
	if req.Params.PageToken != nil {
		var err error
		if after, err = decodeSlugPageToken(*req.Params.PageToken); err != nil {
			return nil, err
		}
	}
	list, err := s.providers().ListIdentityProviders(ctx, s.q(ctx), after, size+1)
	if err != nil {
		return nil, err
	}
	out := api.IdentityProviderList{Items: []api.IdentityProvider{}}
	if len(list) > size {
		list = list[:size]
		tok := base64.RawURLEncoding.EncodeToString([]byte("v1:slug:" + list[size-1].Slug))
		out.NextPageToken = &tok
	}
	for _, p := range list {
		out.Items = append(out.Items, providerJSON(p))
	}
	return api.ListIdentityProviders200JSONResponse{Body: out}, nil
}

func providerConfig(displayName, clientID string, scopes, domains *[]string) domain.ProviderConfig {
	c := domain.ProviderConfig{DisplayName: displayName, ClientID: clientID}
	if scopes != nil {
		c.Scopes = *scopes
	}
	if domains != nil {
		c.AllowedEmailDomains = *domains
	}
	return c
}

// CreateIdentityProvider stores a provider with a pending first revision.
func (s *Server) CreateIdentityProvider(ctx context.Context, req api.CreateIdentityProviderRequestObject) (api.CreateIdentityProviderResponseObject, error) {
	b := req.Body
	in := domain.NewProvider{Slug: b.Slug, Protocol: string(b.Protocol), Issuer: b.Issuer,
		ProviderConfig: providerConfig(b.DisplayName, b.ClientId, b.Scopes, b.AllowedEmailDomains)}
	if b.ClientSecret != nil {
		in.ClientSecret = b.ClientSecret.Value
	}
	p, err := s.providers().CreateIdentityProvider(ctx, s.q(ctx), in)
	if err != nil {
		return nil, err
	}
	st := pipeline.From(ctx)
	st.Audit.ProviderID = p.ID
	st.Audit.ChangedFields = []string{"slug", "protocol", "issuer", "display_name", "client_id", "scopes", "allowed_email_domains"}
	if in.ClientSecret != nil {
		st.Audit.ChangedFields = append(st.Audit.ChangedFields, "client_secret")
	}
	loc := "/api/v1/operator/identity-providers/" + p.ID
	return api.CreateIdentityProvider201JSONResponse{Body: providerJSON(p),
		Headers: api.CreateIdentityProvider201ResponseHeaders{Location: &loc, ETag: etag(p.Version)}}, nil
}

// GetIdentityProvider reads a provider.
func (s *Server) GetIdentityProvider(ctx context.Context, req api.GetIdentityProviderRequestObject) (api.GetIdentityProviderResponseObject, error) {
	p, err := s.providers().GetIdentityProvider(ctx, s.q(ctx), req.ProviderId)
	if err != nil {
		return nil, err
	}
	return api.GetIdentityProvider200JSONResponse{Body: providerJSON(p), Headers: api.GetIdentityProvider200ResponseHeaders{ETag: etag(p.Version)}}, nil
}

// explicitNull reports whether the JSON object body has member name set to null (which the
// generated types cannot tell from the member left out).
func explicitNull(body []byte, name string) bool {
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return false
	}
	v, ok := members[name]
	return ok && bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// PutIdentityProvider writes a provider's configuration as a new pending revision.
func (s *Server) PutIdentityProvider(ctx context.Context, req api.PutIdentityProviderRequestObject) (api.PutIdentityProviderResponseObject, error) {
	st := pipeline.From(ctx)
	st.Audit.ProviderID = req.ProviderId
	b := req.Body
	w := domain.ProviderWrite{ProviderConfig: providerConfig(b.DisplayName, b.ClientId, b.Scopes, b.AllowedEmailDomains),
		Slug: b.Slug, Protocol: b.Protocol, Issuer: b.Issuer}
	switch {
	case b.ClientSecret != nil:
		w.Secret.Replace = b.ClientSecret.Value
	case explicitNull(st.Body, "client_secret"):
		w.Secret.Clear = true
	}
	p, changed, err := s.providers().PutIdentityProvider(ctx, s.q(ctx), req.ProviderId, st.IfMatch, w)
	if err != nil {
		return nil, err
	}
	st.Audit.ChangedFields = changed
	return api.PutIdentityProvider200JSONResponse{Body: providerJSON(p), Headers: api.PutIdentityProvider200ResponseHeaders{ETag: etag(p.Version)}}, nil
}

// DeleteIdentityProvider removes a provider, unless that would lock the deployment out.
func (s *Server) DeleteIdentityProvider(ctx context.Context, req api.DeleteIdentityProviderRequestObject) (api.DeleteIdentityProviderResponseObject, error) {
	st := pipeline.From(ctx)
	st.Audit.ProviderID = req.ProviderId
	if _, err := s.providers().DeleteIdentityProvider(ctx, s.q(ctx), req.ProviderId); err != nil {
		return nil, err
	}
	st.Audit.ChangedFields = []string{"deleted"}
	return api.DeleteIdentityProvider204Response{}, nil
}

// DisableIdentityProvider stops a provider serving sign-in, unless that would lock the
// deployment out.
func (s *Server) DisableIdentityProvider(ctx context.Context, req api.DisableIdentityProviderRequestObject) (api.DisableIdentityProviderResponseObject, error) {
	st := pipeline.From(ctx)
	st.Audit.ProviderID = req.ProviderId
	p, changed, err := s.providers().DisableIdentityProvider(ctx, s.q(ctx), req.ProviderId)
	if err != nil {
		return nil, err
	}
	if changed {
		st.Audit.ChangedFields = []string{"state"}
	}
	return api.DisableIdentityProvider200JSONResponse{Body: providerJSON(p), Headers: api.DisableIdentityProvider200ResponseHeaders{ETag: etag(p.Version)}}, nil
}

// StartIdentityProviderTest binds a test to the provider's pending revision and returns its
// single-use URL (never stored: the pipeline keeps the response without test_url).
func (s *Server) StartIdentityProviderTest(ctx context.Context, req api.StartIdentityProviderTestRequestObject) (api.StartIdentityProviderTestResponseObject, error) {
	st := pipeline.From(ctx)
	st.Audit.ProviderID = req.ProviderId
	t, err := s.providers().StartProviderTest(ctx, s.q(ctx), req.ProviderId, st.Actor.CredentialID, st.Actor.Name)
	if err != nil {
		return nil, err
	}
	testURL := s.cfg.PublicURL + signInTestPath + "?capability=" + t.Capability
	return api.StartIdentityProviderTest201JSONResponse{Body: api.IdentityProviderTest{
		TestUrl: &testURL, Revision: t.Revision, ExpiresAt: t.ExpiresAt.UTC()}}, nil
}
