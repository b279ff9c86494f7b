package server

import (
	"context"

	"renga.dev/renga/gen/api"
)

// GetDeployment describes the deployment.
func (s *Server) GetDeployment(ctx context.Context, _ api.GetDeploymentRequestObject) (api.GetDeploymentResponseObject, error) {
	d := api.Deployment{
		PublicUrl:           s.cfg.PublicURL,
		Environment:         string(s.cfg.Environment),
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
	return api.GetDeployment200JSONResponse{Body: d}, nil
}
