package server

import (
	"context"
	"net/http"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
	"renga.dev/renga/server/problem"
)

// GetTokenSelf describes the calling token.
func (s *Server) GetTokenSelf(ctx context.Context, _ api.GetTokenSelfRequestObject) (api.GetTokenSelfResponseObject, error) {
	st := pipeline.From(ctx)
	if st.Actor.Type != domain.ActorOperatorToken {
		return nil, problem.New(http.StatusNotFound, api.ErrorCodeNotFound, "A release command runs as the local operator, which has no token.")
	}
	t, err := domain.TokenByID(ctx, s.q(ctx), st.Actor.ID)
	if err != nil {
		return nil, err
	}
	return api.GetTokenSelf200JSONResponse{Body: tokenJSON(t)}, nil
}

// RevokeTokenSelf revokes the calling token.
func (s *Server) RevokeTokenSelf(ctx context.Context, _ api.RevokeTokenSelfRequestObject) (api.RevokeTokenSelfResponseObject, error) {
	st := pipeline.From(ctx)
	if st.Actor.Type != domain.ActorOperatorToken {
		return nil, problem.New(http.StatusNotFound, api.ErrorCodeNotFound, "A release command runs as the local operator, which has no token; use `renga operator-token revoke TOKEN_ID`.")
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
