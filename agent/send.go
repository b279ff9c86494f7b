package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"renga.dev/renga/gen/client"
)

// sendAll sends batches until the queue is empty. A batch leaves the queue only on 202; one
// the home refuses as invalid (400, 413) can never be accepted and is dropped, counted.
func (a *Agent) sendAll(ctx context.Context, c *client.ClientWithResponses) error {
	for ctx.Err() == nil {
		b, ok, err := a.queue.NextBatch()
		if err != nil {
			return &stateError{err}
		}
		if !ok {
			return nil
		}
		body, err := json.Marshal(b)
		if err != nil {
			return err
		}
		// A batch in flight when the agent is stopped finishes (within the request timeout), so
		// that its 202 is recorded rather than the batch sent again as a duplicate next time.
		r, err := c.SubmitObservationsWithBodyWithResponse(context.WithoutCancel(ctx), "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		switch r.StatusCode() {
		case http.StatusAccepted:
			if err := a.queue.Sent(b, time.Now()); err != nil {
				return &stateError{err}
			}
			var accepted client.BatchAccepted
			dup := json.Unmarshal(r.Body, &accepted) == nil && accepted.Duplicate
			a.log.Debug("batch sent", "batch_id", b.ID, "observations", len(b.Observations), "duplicate", dup)
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			he := homeError(a.home.Home, r.HTTPResponse, r.Body)
			a.log.Error("the home refused a batch as invalid: dropped", "batch_id", b.ID, "observations", len(b.Observations),
				"status", he.Status, "code", he.Code, "detail", he.Detail)
			if err := a.queue.Rejected(b); err != nil {
				return &stateError{err}
			}
		default:
			return homeError(a.home.Home, r.HTTPResponse, r.Body)
		}
	}
	return ctx.Err()
}

// jobs fetches the installation's jobs (at most once an interval), runs them and reports
// their results; a result not yet reported is kept and sent again.
func (a *Agent) jobs(ctx context.Context, c *client.ClientWithResponses) error {
	if time.Since(a.lastJobsFetch) >= a.cfg.Interval || len(a.pendingJobs) > 0 {
		if time.Since(a.lastJobsFetch) >= a.cfg.Interval {
			r, err := c.ListAgentJobsWithResponse(ctx)
			if err != nil {
				return err
			}
			if r.StatusCode() != http.StatusOK {
				return homeError(a.home.Home, r.HTTPResponse, r.Body)
			}
			var list client.AgentJobList
			if err := json.Unmarshal(r.Body, &list); err != nil {
				return fmt.Errorf("%s: the jobs list is unreadable: %w", a.home.Home, err)
			}
			a.lastJobsFetch = time.Now()
			for _, j := range list.Items {
				if _, ok := a.pendingJobs[j.Id]; !ok {
					a.log.Info("running a job", "job_id", j.Id, "command", j.Command)
					a.pendingJobs[j.Id] = a.runJob(ctx, j.Command)
				}
			}
		}
	}
	for id, result := range a.pendingJobs {
		r, err := c.SubmitJobResultWithResponse(ctx, id, result)
		if err != nil {
			return err
		}
		switch r.StatusCode() {
		case http.StatusOK:
			a.log.Info("reported a job's result", "job_id", id, "status", string(result.Status))
		case http.StatusNotFound, http.StatusConflict, http.StatusBadRequest:
			he := homeError(a.home.Home, r.HTTPResponse, r.Body)
			a.log.Error("the home refused a job's result: not sending it again", "job_id", id, "status", he.Status, "code", he.Code)
		default:
			return homeError(a.home.Home, r.HTTPResponse, r.Body)
		}
		delete(a.pendingJobs, id)
	}
	return nil
}
