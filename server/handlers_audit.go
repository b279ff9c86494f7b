package server

import (
	"context"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
)

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
	return api.ListAuditEvents200JSONResponse{Body: out}, nil
}

func auditJSON(e domain.AuditEvent) api.AuditEvent {
	return api.AuditEvent{
		Id:        e.ID,
		Time:      e.Time.UTC(),
		RequestId: e.RequestID,
		Actor: api.AuditActor{Type: e.ActorType, Id: e.ActorID, NameSnapshot: e.ActorName,
			InvocationId: e.InvocationID},
		Operation: e.Operation,
		Targets: api.AuditTargets{OrganizationId: e.OrganizationID, OrganizationNameSnapshot: e.OrganizationNameSnapshot,
			TokenId: e.TokenID, ProviderId: e.ProviderID, Email: e.TargetEmail},
		Outcome:       e.Outcome,
		Status:        e.Status,
		Error:         e.Error,
		ChangedFields: e.ChangedFields,
		SourceAddress: e.SourceAddress,
	}
}
