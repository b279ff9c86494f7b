package server

import (
	openapi_types "github.com/oapi-codegen/runtime/types"

	"context"
	"fmt"
	"net/http"
	"time"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/problem"
)

// usageRange checks a from..to range of days.
func usageRange(from, to openapi_types.Date) (time.Time, time.Time, error) {
	f, t := from.UTC(), to.UTC()
	if f.Year() < 1 || t.Year() > 9999 {
		pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "Dates must be between 0001-01-01 and 9999-12-31.")
		pe.Errors = []problem.FieldError{{Field: "from", Message: "a date from year 1 to 9999"}}
		return f, t, pe
	}
	if t.Before(f) {
		pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "to is before from.")
		pe.Errors = []problem.FieldError{{Field: "to", Message: "must not be before from"}}
		return f, t, pe
	}
	if t.Sub(f) > (domain.UsageRetentionDays-1)*24*time.Hour {
		pe := problem.Newf(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "A range covers at most %d days.", domain.UsageRetentionDays)
		pe.Errors = []problem.FieldError{{Field: "to", Message: fmt.Sprintf("at most %d days after from", domain.UsageRetentionDays-1)}}
		return f, t, pe
	}
	return f, t, nil
}

// GetOrganizationUsage returns an organization's daily usage.
func (s *Server) GetOrganizationUsage(ctx context.Context, req api.GetOrganizationUsageRequestObject) (api.GetOrganizationUsageResponseObject, error) {
	from, to, err := usageRange(req.Params.From, req.Params.To)
	if err != nil {
		return nil, err
	}
	if _, err := domain.GetOrganization(ctx, s.q(ctx), req.OrganizationId); err != nil {
		return nil, err
	}
	days, err := domain.DailyUsage(ctx, s.q(ctx), req.OrganizationId, from, to)
	if err != nil {
		return nil, err
	}
	out := api.OrganizationUsage{OrganizationId: req.OrganizationId, From: req.Params.From, To: req.Params.To, Days: []api.UsageDay{}}
	for _, d := range days {
		out.Days = append(out.Days, api.UsageDay{Day: openapi_types.Date{Time: d.Day}, IntakeRequests: d.IntakeRequests,
			IntakeBytes: d.IntakeBytes, JobsCreated: d.JobsCreated, TerminalMinutes: d.TerminalMinutes()})
	}
	return api.GetOrganizationUsage200JSONResponse{Body: out}, nil
}

// ListUsage returns per-organization totals over a range.
func (s *Server) ListUsage(ctx context.Context, req api.ListUsageRequestObject) (api.ListUsageResponseObject, error) {
	from, to, err := usageRange(req.Params.From, req.Params.To)
	if err != nil {
		return nil, err
	}
	after, err := optionalPageToken(req.Params.PageToken, "org")
	if err != nil {
		return nil, err
	}
	size := pageSize(req.Params.PageSize)
	totals, err := domain.UsageTotals(ctx, s.q(ctx), from, to, after, size+1)
	if err != nil {
		return nil, err
	}
	out := api.UsageTotalsList{From: req.Params.From, To: req.Params.To, Items: []api.UsageTotals{}}
	totals, out.NextPageToken = page(totals, size, func(t domain.UsageTotal) string { return t.OrganizationID })
	for _, t := range totals {
		out.Items = append(out.Items, api.UsageTotals{OrganizationId: t.OrganizationID, IntakeRequests: t.IntakeRequests,
			IntakeBytes: t.IntakeBytes, JobsCreated: t.JobsCreated, TerminalMinutes: t.TerminalMinutes})
	}
	return api.ListUsage200JSONResponse{Body: out}, nil
}
