package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/problem"
)

// GetHome answers the deployment's own public URL, whatever was asked: a deployment is its own
// home, and nothing of the request shapes the answer.
func (s *Server) GetHome(context.Context, api.GetHomeRequestObject) (api.GetHomeResponseObject, error) {
	return api.GetHome200JSONResponse{Home: s.cfg.PublicURL}, nil
}

func intakeKeyJSON(k domain.IntakeKey) api.IntakeKey {
	return api.IntakeKey{Id: k.ID, Name: k.Name, Identifier: k.Identifier, CreatedAt: k.CreatedAt.UTC(), RevokedAt: utc(k.RevokedAt)}
}

func intakeKeySecretJSON(k domain.IntakeKey, secret string) api.IntakeKeySecret {
	return api.IntakeKeySecret{Id: k.ID, Name: k.Name, Identifier: k.Identifier, CreatedAt: k.CreatedAt.UTC(),
		RevokedAt: utc(k.RevokedAt), Key: secret}
}

// ListIntakeKeys lists the caller's organization's intake keys and the identifier new ones carry.
func (s *Server) ListIntakeKeys(ctx context.Context, req api.ListIntakeKeysRequestObject) (api.ListIntakeKeysResponseObject, error) {
	st := stateFrom(ctx)
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
	return api.ListIntakeKeys200JSONResponse(out), nil
}

// CreateIntakeKey creates an intake key carrying the deployment identifier; shown once.
func (s *Server) CreateIntakeKey(ctx context.Context, req api.CreateIntakeKeyRequestObject) (api.CreateIntakeKeyResponseObject, error) {
	st := stateFrom(ctx)
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
	st := stateFrom(ctx)
	k, changed, err := domain.RevokeIntakeKey(ctx, s.q(ctx), st.Actor.OrganizationID, req.KeyId)
	if err != nil {
		return nil, err
	}
	st.Audit.OwnOrganization(st.Actor, changed)
	return api.RevokeIntakeKey200JSONResponse{Body: intakeKeyJSON(k)}, nil
}

// RotateIntakeKey replaces a key with a new one carrying the current identifier; shown once.
func (s *Server) RotateIntakeKey(ctx context.Context, req api.RotateIntakeKeyRequestObject) (api.RotateIntakeKeyResponseObject, error) {
	st := stateFrom(ctx)
	k, secret, err := domain.RotateIntakeKey(ctx, s.q(ctx), st.Actor.OrganizationID, req.KeyId, s.cfg.DeploymentID)
	if err != nil {
		return nil, err
	}
	st.Audit.OwnOrganization(st.Actor, []string{"intake_keys"})
	loc := "/api/v1/org/intake-keys/" + k.ID
	return api.RotateIntakeKey201JSONResponse{Body: intakeKeySecretJSON(k, secret),
		Headers: api.RotateIntakeKey201ResponseHeaders{Location: &loc}}, nil
}

func installationJSON(i domain.Installation) api.Installation {
	return api.Installation{InstallationId: i.ID, OrganizationId: i.OrganizationID,
		PublicKey: base64.StdEncoding.EncodeToString(i.PublicKey), Hostname: i.Hostname, Os: i.OS,
		RegisteredAt: i.RegisteredAt.UTC(), LastSeenAt: utc(i.LastSeenAt)}
}

// ListAgents lists the caller's organization's installations.
func (s *Server) ListAgents(ctx context.Context, req api.ListAgentsRequestObject) (api.ListAgentsResponseObject, error) {
	st := stateFrom(ctx)
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
	return api.ListAgents200JSONResponse(out), nil
}

// ListObservations pages through an installation's observations.
func (s *Server) ListObservations(ctx context.Context, req api.ListObservationsRequestObject) (api.ListObservationsResponseObject, error) {
	st := stateFrom(ctx)
	var before int64
	if req.Params.PageToken != nil {
		b, err := base64.RawURLEncoding.DecodeString(*req.Params.PageToken)
		n, perr := strconv.ParseInt(strings.TrimPrefix(string(b), "v1:obs_"), 10, 64)
		if err != nil || perr != nil || !strings.HasPrefix(string(b), "v1:obs_") || n <= 0 {
			return nil, problem.New(http.StatusBadRequest, api.ErrorCodeInvalidPageToken, "page_token is not one this list returned; start again without it.")
		}
		before = n
	}
	size := pageSize(req.Params.PageSize)
	obs, err := domain.ListObservations(ctx, s.q(ctx), st.Actor.OrganizationID, req.InstallationId, before, size+1)
	if err != nil {
		return nil, err
	}
	out := api.ObservationList{Items: []api.Observation{}}
	if len(obs) > size {
		obs = obs[:size]
		tok := base64.RawURLEncoding.EncodeToString([]byte("v1:" + domain.FormatObservationID(obs[len(obs)-1].ID)))
		out.NextPageToken = &tok
	}
	for _, o := range obs {
		// UseNumber: numbers go back with the digits they were stored with.
		var data map[string]any
		dec := json.NewDecoder(bytesReader(o.Data))
		dec.UseNumber()
		if err := dec.Decode(&data); err != nil {
			return nil, err
		}
		out.Items = append(out.Items, api.Observation{Id: domain.FormatObservationID(o.ID), InstallationId: o.InstallationID,
			BatchId: o.BatchID, ObservedAt: o.ObservedAt.UTC(), ReceivedAt: o.ReceivedAt.UTC(), Kind: o.Kind, Data: data})
	}
	return api.ListObservations200JSONResponse(out), nil
}

func jobJSON(j domain.Job) (api.Job, error) {
	out := api.Job{Id: j.ID, InstallationId: j.InstallationID, Command: j.Command, State: api.JobState(j.State),
		CreatedAt: j.CreatedAt.UTC(), DeliveredAt: utc(j.DeliveredAt), CompletedAt: utc(j.CompletedAt)}
	if len(j.Result) > 0 {
		var r api.JobResult
		if err := json.Unmarshal(j.Result, &r); err != nil {
			return out, err
		}
		out.Result = &r
	}
	return out, nil
}

// ListJobs pages through the caller's organization's jobs.
func (s *Server) ListJobs(ctx context.Context, req api.ListJobsRequestObject) (api.ListJobsResponseObject, error) {
	st := stateFrom(ctx)
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
	return api.ListJobs200JSONResponse(out), nil
}

// CreateJob queues a job for an agent within the entitlement and the daily limit.
func (s *Server) CreateJob(ctx context.Context, req api.CreateJobRequestObject) (api.CreateJobResponseObject, error) {
	st := stateFrom(ctx)
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

// RegisterInstallation registers an agent with an intake key (idempotent on installation_id).
func (s *Server) RegisterInstallation(ctx context.Context, req api.RegisterInstallationRequestObject) (api.RegisterInstallationResponseObject, error) {
	st := stateFrom(ctx)
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
		return api.RegisterInstallation200JSONResponse(installationJSON(inst)), nil
	}
	st.Audit.OwnOrganization(st.Actor, []string{"agents"})
	return api.RegisterInstallation201JSONResponse(installationJSON(inst)), nil
}

// SubmitObservations accepts a batch once per (installation, batch_id), within the
// organization's intake_bytes_per_day.
func (s *Server) SubmitObservations(ctx context.Context, req api.SubmitObservationsRequestObject) (api.SubmitObservationsResponseObject, error) {
	st := stateFrom(ctx)
	h := st.Installation
	if h == nil {
		return nil, fmt.Errorf("submitObservations without an authenticated installation")
	}
	observations, pe := storableObservations(st.Body)
	if pe != nil {
		return nil, pe
	}
	bytes := int64(len(st.Body))
	limit := domain.Effective(h.Policy, s.cfg.PolicyDefaults, domain.Settings{}).Limits.IntakeBytesPerDay.Value
	today := h.IntakeToday
	// Far from the limit, batches go in parallel. Near it (within what many batches in flight
	// could add), they serialize on the organization and read the committed total afresh.
	if today+bytes > limit-s.intakeExactMargin() {
		if st.Tx == nil {
			return nil, fmt.Errorf("submitObservations outside the mutation transaction")
		}
		var err error
		if today, err = domain.IntakeTodayLocked(ctx, st.Tx, h.Org.ID); err != nil {
			return nil, err
		}
	}
	if today+bytes > limit {
		// A retry of a batch accepted before the limit was reached is still a duplicate.
		if dup, err := domain.BatchSeen(ctx, s.q(ctx), h.Installation.ID, req.Body.BatchId); err != nil || dup {
			return api.SubmitObservations202JSONResponse{Accepted: len(req.Body.Observations), Duplicate: true}, err
		}
		return nil, &domain.DailyLimitError{Limit: "intake_bytes_per_day", Value: limit}
	}
	fresh, err := domain.AcceptBatch(ctx, s.q(ctx), h.Org.ID, h.Installation.ID, req.Body.BatchId, observations, bytes)
	if err != nil {
		return nil, err
	}
	return api.SubmitObservations202JSONResponse{Accepted: len(req.Body.Observations), Duplicate: !fresh}, nil
}

// ListAgentJobs returns the installation's pending jobs and marks them delivered.
func (s *Server) ListAgentJobs(ctx context.Context, _ api.ListAgentJobsRequestObject) (api.ListAgentJobsResponseObject, error) {
	st := stateFrom(ctx)
	jobs, err := domain.PendingJobs(ctx, s.q(ctx), st.Actor.CredentialID)
	if err != nil {
		return nil, err
	}
	out := api.AgentJobList{Items: []api.AgentJob{}}
	for _, j := range jobs {
		out.Items = append(out.Items, api.AgentJob{Id: j.ID, Command: j.Command, CreatedAt: j.CreatedAt.UTC()})
	}
	return api.ListAgentJobs200JSONResponse(out), nil
}

// SubmitJobResult records a job's result once.
func (s *Server) SubmitJobResult(ctx context.Context, req api.SubmitJobResultRequestObject) (api.SubmitJobResultResponseObject, error) {
	st := stateFrom(ctx)
	j, err := domain.CompleteJob(ctx, s.q(ctx), st.Actor.CredentialID, req.JobId,
		domain.JobResult{Status: string(req.Body.Status), ExitCode: req.Body.ExitCode, Output: req.Body.Output})
	if err != nil {
		return nil, err
	}
	out, err := jobJSON(j)
	if err != nil {
		return nil, err
	}
	return api.SubmitJobResult200JSONResponse(out), nil
}

// storableObservations re-encodes a batch's observations for PostgreSQL's jsonb: numbers keep
// their digits (json.Number), a lone surrogate escape becomes U+FFFD instead of an error, and
// timestamps PostgreSQL cannot hold (years outside 1..9999) are refused.
func storableObservations(body []byte) (json.RawMessage, *problem.Error) {
	var batch struct {
		Observations []map[string]any `json:"observations"`
	}
	dec := json.NewDecoder(bytesReader(body))
	dec.UseNumber()
	if err := dec.Decode(&batch); err != nil {
		return nil, problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The body is not a batch of observations.")
	}
	for i, o := range batch.Observations {
		s, _ := o["observed_at"].(string)
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || t.Year() < 1 || t.Year() > 9999 {
			pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "observed_at must be an RFC 3339 time between years 1 and 9999.")
			pe.Errors = []problem.FieldError{{Field: fmt.Sprintf("observations.%d.observed_at", i), Message: "RFC 3339, years 1 to 9999"}}
			return nil, pe
		}
	}
	out, err := json.Marshal(batch.Observations)
	if err != nil {
		return nil, problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The observations cannot be stored.")
	}
	return out, nil
}

// intakeExactMargin is how close to intake_bytes_per_day an organization's intake serializes:
// what the batches this server can have in flight at once (one per database connection, at
// least 64) could add to the total read at the start of a batch's transaction.
func (s *Server) intakeExactMargin() int64 {
	return int64(max(64, s.pool.Config().MaxConns)) * MaxBodyBytes
}

// untilNextUTCMidnight is the Retry-After of a daily limit.
func untilNextUTCMidnight(now time.Time) int {
	now = now.UTC()
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	return max(1, int(next.Sub(now).Seconds()+0.999))
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
