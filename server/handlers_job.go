package server

import (
	"context"
	"encoding/json"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
)

func jobJSON(j domain.Job) (api.Job, error) {
	out := api.Job{Id: j.ID, InstallationId: j.InstallationID, Command: j.Command, State: j.State,
		CreatedAt: j.CreatedAt.UTC(), DeliveredAt: utc(j.DeliveredAt), CompletedAt: utc(j.CompletedAt)}
	if len(j.Result) > 0 {
		var r api.JobReport
		if err := json.Unmarshal(j.Result, &r); err != nil {
			return out, err
		}
		out.Result = &r
	}
	return out, nil
}

// ListJobs pages through the caller's organization's jobs.
func (s *Server) ListJobs(ctx context.Context, req api.ListJobsRequestObject) (api.ListJobsResponseObject, error) {
	st := pipeline.From(ctx)
	before, err := optionalPageToken(req.Params.PageToken, "job")
	if err != nil {
		return nil, err
	}
	size := pageSize(req.Params.PageSize)
	jobs, err := domain.ListJobs(ctx, s.q(ctx), st.Actor.OrganizationID, before, size+1)
	if err != nil {
		return nil, err
	}
	out := api.JobList{Items: []api.Job{}}
	jobs, out.NextPageToken = page(jobs, size, func(j domain.Job) string { return j.ID })
	for _, j := range jobs {
		jj, err := jobJSON(j)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, jj)
	}
	return api.ListJobs200JSONResponse{Body: out}, nil
}

// CreateJob queues a job for an agent within the entitlement and the daily limit.
func (s *Server) CreateJob(ctx context.Context, req api.CreateJobRequestObject) (api.CreateJobResponseObject, error) {
	st := pipeline.From(ctx)
	j, err := domain.CreateJob(ctx, s.q(ctx), st.Actor.OrganizationID, req.Body.InstallationId, req.Body.Command, s.cfg.PolicyDefaults)
	if err != nil {
		return nil, err
	}
	st.Audit.OwnOrganization(st.Actor, []string{"jobs"})
	out, err := jobJSON(j)
	if err != nil {
		return nil, err
	}
	loc := "/api/v1/org/jobs/" + j.ID
	return api.CreateJob201JSONResponse{Body: out, Headers: api.CreateJob201ResponseHeaders{Location: &loc}}, nil
}

// ListAgentJobs returns the installation's pending jobs and marks them delivered. It is an
// agent's write: its transaction has checked the organization's state and a move's freeze under
// the organization's row lock before (domain.BeginWrite), so no frozen listing marks a job.
func (s *Server) ListAgentJobs(ctx context.Context, _ api.ListAgentJobsRequestObject) (api.ListAgentJobsResponseObject, error) {
	st := pipeline.From(ctx)
	jobs, err := domain.PendingJobs(ctx, s.q(ctx), st.Actor.CredentialID)
	if err != nil {
		return nil, err
	}
	out := api.AgentJobList{Items: []api.AgentJob{}}
	for _, j := range jobs {
		out.Items = append(out.Items, api.AgentJob{Id: j.ID, Command: j.Command, CreatedAt: j.CreatedAt.UTC()})
	}
	return api.ListAgentJobs200JSONResponse{Body: out}, nil
}

// SubmitJobResult records a job's result once.
func (s *Server) SubmitJobResult(ctx context.Context, req api.SubmitJobResultRequestObject) (api.SubmitJobResultResponseObject, error) {
	st := pipeline.From(ctx)
	j, err := domain.CompleteJob(ctx, s.q(ctx), st.Actor.CredentialID, req.JobId,
		domain.JobResult{Status: string(req.Body.Status), ExitCode: req.Body.ExitCode, Output: req.Body.Output})
	if err != nil {
		return nil, err
	}
	out, err := jobJSON(j)
	if err != nil {
		return nil, err
	}
	return api.SubmitJobResult200JSONResponse{Body: out}, nil
}
