package server

import (
	"context"
	"encoding/base64"
	"net/http"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
	"renga.dev/renga/server/problem"
)

func installationJSON(i domain.Installation) api.Installation {
	return api.Installation{InstallationId: i.ID, OrganizationId: i.OrganizationID,
		PublicKey: base64.StdEncoding.EncodeToString(i.PublicKey), Hostname: i.Hostname, Os: i.OS,
		RegisteredAt: i.RegisteredAt.UTC(), LastSeenAt: utc(i.LastSeenAt)}
}

// ListAgents lists the caller's organization's installations.
func (s *Server) ListAgents(ctx context.Context, req api.ListAgentsRequestObject) (api.ListAgentsResponseObject, error) {
	st := pipeline.From(ctx)
	after, err := optionalPageToken(req.Params.PageToken, "ins")
	if err != nil {
		return nil, err
	}
	size := pageSize(req.Params.PageSize)
	insts, err := domain.ListInstallations(ctx, s.q(ctx), st.Actor.OrganizationID, after, size+1)
	if err != nil {
		return nil, err
	}
	out := api.AgentList{Items: []api.Installation{}}
	insts, out.NextPageToken = page(insts, size, func(i domain.Installation) string { return i.ID })
	for _, i := range insts {
		out.Items = append(out.Items, installationJSON(i))
	}
	return api.ListAgents200JSONResponse{Body: out}, nil
}

// RegisterInstallation registers an agent with an intake key (idempotent on installation_id).
func (s *Server) RegisterInstallation(ctx context.Context, req api.RegisterInstallationRequestObject) (api.RegisterInstallationResponseObject, error) {
	st := pipeline.From(ctx)
	pub, err := base64.StdEncoding.DecodeString(req.Body.PublicKey)
	if err != nil || len(pub) != 32 {
		pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "public_key must be a 32-byte Ed25519 key in standard base64.")
		pe.Errors = []problem.FieldError{{Field: "public_key", Message: "32 bytes, standard base64"}}
		return nil, pe
	}
	inst, created, err := domain.RegisterInstallation(ctx, s.q(ctx), st.Actor.OrganizationID, st.Actor.CredentialID,
		domain.Installation{ID: req.Body.InstallationId, PublicKey: pub, Hostname: req.Body.Hostname, OS: req.Body.Os}, s.cfg.PolicyDefaults)
	if err != nil {
		return nil, err
	}
	if !created {
		return api.RegisterInstallation200JSONResponse{Body: installationJSON(inst)}, nil
	}
	st.Audit.OwnOrganization(st.Actor, []string{"agents"})
	return api.RegisterInstallation201JSONResponse{Body: installationJSON(inst)}, nil
}
