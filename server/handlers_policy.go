package server

import (
	"context"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
)

func policyJSON(p domain.Policy) (api.Policy, error) {
	out, err := convert[api.Policy](p.Document)
	out.OrganizationId, out.Version = p.OrganizationID, p.Version
	return out, err
}

// GetPolicy reads an organization's policy document.
func (s *Server) GetPolicy(ctx context.Context, req api.GetPolicyRequestObject) (api.GetPolicyResponseObject, error) {
	p, ok, err := pipeline.Prefetched[domain.Policy](ctx)
	if !ok {
		p, err = domain.GetPolicy(ctx, s.q(ctx), req.OrganizationId)
	}
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
	// A GET body written back carries organization_id: it must be this one, then it is dropped.
	if id := req.Body.OrganizationId; id != nil {
		if *id != req.OrganizationId {
			return nil, &domain.ValidationError{Field: "organization_id", Message: "must be the organization in the path, " + req.OrganizationId}
		}
		req.Body.OrganizationId = nil
	}
	doc, err := convert[domain.PolicyDocument](req.Body)
	if err != nil {
		return nil, err
	}
	st := pipeline.From(ctx)
	p, o, changed, err := domain.PutPolicy(ctx, s.q(ctx), req.OrganizationId, st.IfMatch, doc, s.cfg.PolicyDefaults)
	if err != nil {
		return nil, err
	}
	st.Audit.Target(o, changed)
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
	out, err := convert[api.EffectivePolicy](e)
	if err != nil {
		return nil, err
	}
	out.OrganizationId = req.OrganizationId
	return api.GetEffectivePolicy200JSONResponse{Body: out}, nil
}
