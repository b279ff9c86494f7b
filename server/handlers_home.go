package server

import (
	"context"

	"renga.dev/renga/gen/api"
)

// GetHome answers the deployment's own public URL, whatever was asked: a deployment is its own
// home, and nothing of the request shapes the answer.
func (s *Server) GetHome(context.Context, api.GetHomeRequestObject) (api.GetHomeResponseObject, error) {
	return api.GetHome200JSONResponse{Body: api.Home{Home: s.cfg.PublicURL}}, nil
}
