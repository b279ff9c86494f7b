package server

import (
	"context"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
)

// ListActivity pages through the caller's organization's Activity.
func (s *Server) ListActivity(ctx context.Context, req api.ListActivityRequestObject) (api.ListActivityResponseObject, error) {
	st := pipeline.From(ctx)
	before, err := optionalPageToken(req.Params.PageToken, "evt") // an entry is its audit event (migration 00018)
	if err != nil {
		return nil, err
	}
	size := pageSize(req.Params.PageSize)
	acts, err := domain.ListActivity(ctx, s.q(ctx), st.Actor.OrganizationID, before, size+1)
	if err != nil {
		return nil, err
	}
	out := api.ActivityList{Items: []api.Activity{}}
	acts, out.NextPageToken = page(acts, size, func(a domain.Activity) string { return a.ID })
	for _, a := range acts {
		out.Items = append(out.Items, api.Activity{Id: a.ID, Time: a.Time.UTC(), RequestId: a.RequestID, Operation: a.Operation,
			ChangedFields: a.ChangedFields, Actor: api.ActivityActor{Type: a.ActorType, Id: a.ActorID,
				NameSnapshot: a.ActorName, InvocationId: a.InvocationID}})
	}
	return api.ListActivity200JSONResponse{Body: out}, nil
}
