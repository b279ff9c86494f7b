package server

import (
	openapi_types "github.com/oapi-codegen/runtime/types"

	"context"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
)

func orgJSON(o domain.Organization) api.Organization {
	return api.Organization{Id: o.ID, Slug: o.Slug, DisplayName: o.DisplayName, State: o.State,
		SuspendedReason: o.SuspendedReason, PurgeAfter: utc(o.PurgeAfter),
		Version: o.Version, CreatedAt: o.CreatedAt.UTC(), UpdatedAt: o.UpdatedAt.UTC()}
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
	return api.ListOrganizations200JSONResponse{Body: out}, nil
}

// CreateOrganization creates an organization.
func (s *Server) CreateOrganization(ctx context.Context, req api.CreateOrganizationRequestObject) (api.CreateOrganizationResponseObject, error) {
	st := pipeline.From(ctx)
	var o domain.Organization
	if st.TxNow.IsZero() {
		var err error
		if o, err = domain.CreateOrganization(ctx, s.q(ctx), req.Body.Slug, req.Body.DisplayName); err != nil {
			return nil, err
		}
	} else {
		// The row is known in full: it is created in the write's last round trip, with the
		// stored result and the audit (a taken slug fails that round trip: a 409, nothing kept).
		var sql string
		var args []any
		o, sql, args = domain.DeferredOrganizationCreate(req.Body.Slug, req.Body.DisplayName, st.TxNow)
		st.Defer(sql, args, domain.SlugTakenError)
	}
	st.Audit.Target(o, []string{"slug", "display_name"})
	loc := "/api/v1/operator/organizations/" + o.ID
	return api.CreateOrganization201JSONResponse{Body: orgJSON(o),
		Headers: api.CreateOrganization201ResponseHeaders{ETag: etag(o.Version), Location: &loc}}, nil
}

// GetOrganization reads an organization.
func (s *Server) GetOrganization(ctx context.Context, req api.GetOrganizationRequestObject) (api.GetOrganizationResponseObject, error) {
	o, ok, err := pipeline.Prefetched[domain.Organization](ctx)
	if !ok {
		o, err = domain.GetOrganization(ctx, s.q(ctx), req.OrganizationId)
	}
	if err != nil {
		return nil, err
	}
	return api.GetOrganization200JSONResponse{Body: orgJSON(o), Headers: api.GetOrganization200ResponseHeaders{ETag: etag(o.Version)}}, nil
}

// UpdateOrganization changes the display name, guarded by If-Match.
func (s *Server) UpdateOrganization(ctx context.Context, req api.UpdateOrganizationRequestObject) (api.UpdateOrganizationResponseObject, error) {
	st := pipeline.From(ctx)
	o, changed, err := domain.UpdateOrganization(ctx, s.q(ctx), req.OrganizationId, st.IfMatch, req.Body.DisplayName)
	if err != nil {
		return nil, err
	}
	st.Audit.Target(o, changed)
	return api.UpdateOrganization200JSONResponse{Body: orgJSON(o), Headers: api.UpdateOrganization200ResponseHeaders{ETag: etag(o.Version)}}, nil
}

// SuspendOrganization suspends an organization (target-state idempotent).
func (s *Server) SuspendOrganization(ctx context.Context, req api.SuspendOrganizationRequestObject) (api.SuspendOrganizationResponseObject, error) {
	o, changed, err := domain.SuspendOrganization(ctx, s.q(ctx), req.OrganizationId, req.Body.Reason)
	if err != nil {
		return nil, err
	}
	pipeline.From(ctx).Audit.Target(o, changed)
	return api.SuspendOrganization200JSONResponse{Body: orgJSON(o), Headers: api.SuspendOrganization200ResponseHeaders{ETag: etag(o.Version)}}, nil
}

// ResumeOrganization makes an organization active (target-state idempotent).
func (s *Server) ResumeOrganization(ctx context.Context, req api.ResumeOrganizationRequestObject) (api.ResumeOrganizationResponseObject, error) {
	o, changed, err := domain.ResumeOrganization(ctx, s.q(ctx), req.OrganizationId)
	if err != nil {
		return nil, err
	}
	pipeline.From(ctx).Audit.Target(o, changed)
	return api.ResumeOrganization200JSONResponse{Body: orgJSON(o), Headers: api.ResumeOrganization200ResponseHeaders{ETag: etag(o.Version)}}, nil
}

// ScheduleOrganizationDeletion schedules the purge (target-state idempotent).
func (s *Server) ScheduleOrganizationDeletion(ctx context.Context, req api.ScheduleOrganizationDeletionRequestObject) (api.ScheduleOrganizationDeletionResponseObject, error) {
	o, changed, err := domain.ScheduleDeletion(ctx, s.q(ctx), req.OrganizationId, s.cfg.DeletionGracePeriod)
	if err != nil {
		return nil, err
	}
	pipeline.From(ctx).Audit.Target(o, changed)
	return api.ScheduleOrganizationDeletion200JSONResponse{Body: orgJSON(o),
		Headers: api.ScheduleOrganizationDeletion200ResponseHeaders{ETag: etag(o.Version)}}, nil
}

// CancelOrganizationDeletion cancels a scheduled deletion (target-state idempotent).
func (s *Server) CancelOrganizationDeletion(ctx context.Context, req api.CancelOrganizationDeletionRequestObject) (api.CancelOrganizationDeletionResponseObject, error) {
	o, changed, err := domain.CancelDeletion(ctx, s.q(ctx), req.OrganizationId)
	if err != nil {
		return nil, err
	}
	pipeline.From(ctx).Audit.Target(o, changed)
	return api.CancelOrganizationDeletion200JSONResponse{Body: orgJSON(o),
		Headers: api.CancelOrganizationDeletion200ResponseHeaders{ETag: etag(o.Version)}}, nil
}

// ListOrganizationOwners pages through an organization's owners.
func (s *Server) ListOrganizationOwners(ctx context.Context, req api.ListOrganizationOwnersRequestObject) (api.ListOrganizationOwnersResponseObject, error) {
	if _, err := domain.GetOrganization(ctx, s.q(ctx), req.OrganizationId); err != nil {
		return nil, err
	}
	after, err := optionalPageToken(req.Params.PageToken, "usr")
	if err != nil {
		return nil, err
	}
	size := pageSize(req.Params.PageSize)
	owners, err := domain.ListOwners(ctx, s.q(ctx), req.OrganizationId, after, size+1)
	if err != nil {
		return nil, err
	}
	out := api.OwnerList{Items: []api.Owner{}}
	owners, out.NextPageToken = page(owners, size, func(o domain.Owner) string { return o.UserID })
	for _, o := range owners {
		out.Items = append(out.Items, api.Owner{UserId: o.UserID, Email: openapi_types.Email(o.Email), DisplayName: o.DisplayName, Since: o.Since.UTC()})
	}
	return api.ListOrganizationOwners200JSONResponse{Body: out}, nil
}
