package server

import (
	"context"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/domain/policyfield"
	"renga.dev/renga/server/pipeline"
)

// settingsJSON is the settings as owners read them: the values that apply (a locked setting's
// locked value), with the locks.
func (s *Server) settingsJSON(ctx context.Context, orgID string, d domain.SettingsDocument) (api.Settings, error) {
	e, err := s.effective(ctx, orgID)
	if err != nil {
		return api.Settings{}, err
	}
	locks := e.Locks()
	locked, err := convert[api.LockedSettings](locks.Section(policyfield.LockedSettings))
	applied := d.Settings.Applied(locks)
	return api.Settings{RequireSso: applied.RequireSSO, RequireMfa: applied.RequireMFA,
		SessionMaxAgeHours: applied.SessionMaxAgeHours, AllowedEmailDomains: applied.AllowedEmailDomains,
		Locked: locked, Version: d.Version}, err
}

// GetSettings reads the owners' security settings as they apply, and what the policy locks.
func (s *Server) GetSettings(ctx context.Context, _ api.GetSettingsRequestObject) (api.GetSettingsResponseObject, error) {
	orgID := pipeline.From(ctx).Actor.OrganizationID
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
	st := pipeline.From(ctx)
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
