package server

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"strings"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/problem"
)

// GetDeployment describes the deployment.
func (s *Server) GetDeployment(ctx context.Context, _ api.GetDeploymentRequestObject) (api.GetDeploymentResponseObject, error) {
	d := api.Deployment{
		PublicUrl:           s.cfg.PublicURL,
		Environment:         api.DeploymentEnvironment(s.cfg.Environment),
		Version:             s.cfg.Version,
		DeletionGracePeriod: s.cfg.DeletionGracePeriod.String(),
	}
	if s.cfg.DeploymentID != "" {
		d.Identifier = &s.cfg.DeploymentID
	}
	var err error
	if d.PolicyDefaults, err = convert[api.PolicyDefaults](s.cfg.PolicyDefaults); err != nil {
		return nil, err
	}
	return api.GetDeployment200JSONResponse(d), nil
}

// GetTokenSelf describes the calling token.
func (s *Server) GetTokenSelf(ctx context.Context, _ api.GetTokenSelfRequestObject) (api.GetTokenSelfResponseObject, error) {
	st := stateFrom(ctx)
	if st.Actor.Type != domain.ActorOperatorToken {
		return nil, problem.New(http.StatusNotFound, api.ErrorCodeNotFound, "A release command runs as the local operator, which has no token.")
	}
	t, err := domain.TokenByID(ctx, s.q(ctx), st.Actor.ID)
	if err != nil {
		return nil, err
	}
	return api.GetTokenSelf200JSONResponse(tokenJSON(t)), nil
}

// RevokeTokenSelf revokes the calling token.
func (s *Server) RevokeTokenSelf(ctx context.Context, _ api.RevokeTokenSelfRequestObject) (api.RevokeTokenSelfResponseObject, error) {
	st := stateFrom(ctx)
	if st.Actor.Type != domain.ActorOperatorToken {
		return nil, problem.New(http.StatusNotFound, api.ErrorCodeNotFound, "A release command runs as the local operator, which has no token; use `renga operator-token revoke ID`.")
	}
	t, err := domain.RevokeToken(ctx, s.q(ctx), st.Actor.ID)
	if err != nil {
		return nil, err
	}
	st.Audit.TokenID = t.ID
	st.Audit.ChangedFields = []string{"revoked_at"}
	return api.RevokeTokenSelf204Response{}, nil
}

func tokenJSON(t domain.Token) api.OperatorToken {
	out := api.OperatorToken{Id: t.ID, Name: t.Name, CreatedAt: t.CreatedAt.UTC(), ExpiresAt: t.ExpiresAt,
		Scopes: make([]api.Scope, len(t.Scopes)), AllowedSources: make([]string, len(t.AllowedSources))}
	for i, sc := range t.Scopes {
		out.Scopes[i] = api.Scope(sc)
	}
	for i, p := range t.AllowedSources {
		out.AllowedSources[i] = p.String()
	}
	if out.ExpiresAt != nil {
		e := out.ExpiresAt.UTC()
		out.ExpiresAt = &e
	}
	return out
}

// ListOrganizations pages through organizations in creation order.
func (s *Server) ListOrganizations(ctx context.Context, req api.ListOrganizationsRequestObject) (api.ListOrganizationsResponseObject, error) {
	f := domain.OrganizationFilter{Limit: pageSize(req.Params.PageSize) + 1}
	if req.Params.State != nil {
		f.State = string(*req.Params.State)
	}
	if req.Params.Slug != nil {
		f.Slug = *req.Params.Slug
	}
	if req.Params.PageToken != nil {
		after, err := decodePageToken(*req.Params.PageToken, "org")
		if err != nil {
			return nil, err
		}
		f.After = after
	}
	orgs, err := domain.ListOrganizations(ctx, s.q(ctx), f)
	if err != nil {
		return nil, err
	}
	out := api.OrganizationList{Items: []api.Organization{}}
	orgs, out.NextPageToken = page(orgs, f.Limit-1, func(o domain.Organization) string { return o.ID })
	for _, o := range orgs {
		out.Items = append(out.Items, orgJSON(o))
	}
	return api.ListOrganizations200JSONResponse(out), nil
}

// CreateOrganization creates an organization.
func (s *Server) CreateOrganization(ctx context.Context, req api.CreateOrganizationRequestObject) (api.CreateOrganizationResponseObject, error) {
	o, err := domain.CreateOrganization(ctx, s.q(ctx), req.Body.Slug, req.Body.DisplayName)
	if err != nil {
		return nil, err
	}
	st := stateFrom(ctx)
	st.Audit.Target(o)
	st.Audit.ChangedFields = []string{"slug", "display_name"}
	loc := "/api/v1/operator/organizations/" + o.ID
	return api.CreateOrganization201JSONResponse{Body: orgJSON(o),
		Headers: api.CreateOrganization201ResponseHeaders{Location: &loc, ETag: etag(o.Version)}}, nil
}

// GetOrganization reads an organization.
func (s *Server) GetOrganization(ctx context.Context, req api.GetOrganizationRequestObject) (api.GetOrganizationResponseObject, error) {
	o, err := domain.GetOrganization(ctx, s.q(ctx), req.OrganizationId)
	if err != nil {
		return nil, err
	}
	return api.GetOrganization200JSONResponse{Body: orgJSON(o), Headers: api.GetOrganization200ResponseHeaders{ETag: etag(o.Version)}}, nil
}

// UpdateOrganization changes the display name, guarded by If-Match.
func (s *Server) UpdateOrganization(ctx context.Context, req api.UpdateOrganizationRequestObject) (api.UpdateOrganizationResponseObject, error) {
	st := stateFrom(ctx)
	o, changed, err := domain.UpdateOrganization(ctx, s.q(ctx), req.OrganizationId, st.IfMatch, req.Body.DisplayName)
	if err != nil {
		return nil, err
	}
	st.Audit.Target(o)
	st.Audit.ChangedFields = changed
	return api.UpdateOrganization200JSONResponse{Body: orgJSON(o), Headers: api.UpdateOrganization200ResponseHeaders{ETag: etag(o.Version)}}, nil
}

// ListAuditEvents pages through the audit log, newest first.
func (s *Server) ListAuditEvents(ctx context.Context, req api.ListAuditEventsRequestObject) (api.ListAuditEventsResponseObject, error) {
	p := req.Params
	f := domain.AuditFilter{Limit: pageSize(p.PageSize) + 1, Since: p.Since, Until: p.Until}
	if p.OrganizationId != nil {
		f.OrganizationID = *p.OrganizationId
	}
	if p.ActorId != nil {
		f.ActorID = *p.ActorId
	}
	if p.Operation != nil {
		f.Operation = *p.Operation
	}
	if p.Outcome != nil {
		f.Outcome = string(*p.Outcome)
	}
	if p.PageToken != nil {
		before, err := decodePageToken(*p.PageToken, "evt")
		if err != nil {
			return nil, err
		}
		f.Before = before
	}
	events, err := domain.ListAuditEvents(ctx, s.q(ctx), f)
	if err != nil {
		return nil, err
	}
	out := api.AuditEventList{Items: []api.AuditEvent{}}
	events, out.NextPageToken = page(events, f.Limit-1, func(e domain.AuditEvent) string { return e.ID })
	for _, e := range events {
		out.Items = append(out.Items, auditJSON(e))
	}
	return api.ListAuditEvents200JSONResponse(out), nil
}

func auditJSON(e domain.AuditEvent) api.AuditEvent {
	return api.AuditEvent{
		Id:        e.ID,
		Time:      e.Time.UTC(),
		RequestId: e.RequestID,
		Actor: api.AuditActor{Type: api.AuditActorType(e.ActorType), Id: e.ActorID, NameSnapshot: e.ActorName,
			InvocationId: e.InvocationID},
		Operation: e.Operation,
		Targets: api.AuditTargets{OrganizationId: e.OrganizationID, OrganizationNameSnapshot: e.OrganizationNameSnapshot,
			TokenId: e.TokenID},
		Outcome:       api.AuditOutcome(e.Outcome),
		Status:        e.Status,
		Error:         e.Error,
		ChangedFields: e.ChangedFields,
		SourceAddress: e.SourceAddress,
	}
}

func orgJSON(o domain.Organization) api.Organization {
	return api.Organization{Id: o.ID, Slug: o.Slug, DisplayName: o.DisplayName, State: api.OrganizationState(o.State),
		SuspendedReason: o.SuspendedReason, PurgeAfter: utc(o.PurgeAfter),
		Version: o.Version, CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC()}
}

func etag(version int64) *string {
	s := fmt.Sprintf(`"%d"`, version)
	return &s
}

func pageSize(p *int) int {
	if p == nil {
		return 100
	}
	return *p
}

// page trims a result fetched with one extra row and returns the next page token, if any.
func page[T any](items []T, size int, id func(T) string) ([]T, *string) {
	if len(items) <= size {
		return items, nil
	}
	items = items[:size]
	tok := encodePageToken(id(items[len(items)-1]))
	return items, &tok
}

// Page tokens are opaque to clients: a version tag and the last ID seen, base64url-encoded.
func encodePageToken(lastID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1:" + lastID))
}

var idPattern = regexp.MustCompile(`^[a-z]{3}_[0-9a-z]{26}$`)

func decodePageToken(tok, prefix string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	id, ok := strings.CutPrefix(string(b), "v1:")
	if err != nil || !ok || !idPattern.MatchString(id) || !strings.HasPrefix(id, prefix+"_") {
		return "", problem.New(http.StatusBadRequest, api.ErrorCodeInvalidPageToken,
			"page_token is not one this list returned; start again without it.")
	}
	return id, nil
}
