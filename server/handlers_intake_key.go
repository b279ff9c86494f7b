package server

import (
	"context"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
)

func intakeKeyJSON(k domain.IntakeKey) api.IntakeKey {
	return api.IntakeKey{Id: k.ID, Name: k.Name, Identifier: k.Identifier, CreatedAt: k.CreatedAt.UTC(), RevokedAt: utc(k.RevokedAt)}
}

func intakeKeySecretJSON(k domain.IntakeKey, secret string) api.IntakeKeySecret {
	return api.IntakeKeySecret{Id: k.ID, Name: k.Name, Identifier: k.Identifier, CreatedAt: k.CreatedAt.UTC(),
		RevokedAt: utc(k.RevokedAt), Key: secret}
}

// ListIntakeKeys lists the caller's organization's intake keys and the identifier new ones carry.
func (s *Server) ListIntakeKeys(ctx context.Context, req api.ListIntakeKeysRequestObject) (api.ListIntakeKeysResponseObject, error) {
	st := pipeline.From(ctx)
	before, err := optionalPageToken(req.Params.PageToken, "key")
	if err != nil {
		return nil, err
	}
	size := pageSize(req.Params.PageSize)
	keys, err := domain.ListIntakeKeys(ctx, s.q(ctx), st.Actor.OrganizationID, before, size+1)
	if err != nil {
		return nil, err
	}
	out := api.IntakeKeyList{Items: []api.IntakeKey{}}
	if s.cfg.DeploymentID != "" {
		out.DeploymentIdentifier = &s.cfg.DeploymentID
	}
	keys, out.NextPageToken = page(keys, size, func(k domain.IntakeKey) string { return k.ID })
	for _, k := range keys {
		out.Items = append(out.Items, intakeKeyJSON(k))
	}
	return api.ListIntakeKeys200JSONResponse{Body: out}, nil
}

// CreateIntakeKey creates an intake key carrying the deployment identifier; shown once.
func (s *Server) CreateIntakeKey(ctx context.Context, req api.CreateIntakeKeyRequestObject) (api.CreateIntakeKeyResponseObject, error) {
	st := pipeline.From(ctx)
	k, secret, err := domain.CreateIntakeKey(ctx, s.q(ctx), st.Actor.OrganizationID, req.Body.Name, s.cfg.DeploymentID)
	if err != nil {
		return nil, err
	}
	st.Audit.OwnOrganization(st.Actor, []string{"intake_keys"})
	loc := "/api/v1/org/intake-keys/" + k.ID
	return api.CreateIntakeKey201JSONResponse{Body: intakeKeySecretJSON(k, secret),
		Headers: api.CreateIntakeKey201ResponseHeaders{Location: &loc}}, nil
}

// RevokeIntakeKey revokes an intake key (idempotent).
func (s *Server) RevokeIntakeKey(ctx context.Context, req api.RevokeIntakeKeyRequestObject) (api.RevokeIntakeKeyResponseObject, error) {
	st := pipeline.From(ctx)
	k, changed, err := domain.RevokeIntakeKey(ctx, s.q(ctx), st.Actor.OrganizationID, req.KeyId)
	if err != nil {
		return nil, err
	}
	st.Audit.OwnOrganization(st.Actor, changed)
	return api.RevokeIntakeKey200JSONResponse{Body: intakeKeyJSON(k)}, nil
}

// RotateIntakeKey replaces a key with a new one carrying the current identifier; shown once.
func (s *Server) RotateIntakeKey(ctx context.Context, req api.RotateIntakeKeyRequestObject) (api.RotateIntakeKeyResponseObject, error) {
	st := pipeline.From(ctx)
	k, secret, err := domain.RotateIntakeKey(ctx, s.q(ctx), st.Actor.OrganizationID, req.KeyId, s.cfg.DeploymentID)
	if err != nil {
		return nil, err
	}
	st.Audit.OwnOrganization(st.Actor, []string{"intake_keys"})
	loc := "/api/v1/org/intake-keys/" + k.ID
	return api.RotateIntakeKey201JSONResponse{Body: intakeKeySecretJSON(k, secret),
		Headers: api.RotateIntakeKey201ResponseHeaders{Location: &loc}}, nil
}
