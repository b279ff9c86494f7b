package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/domain/policyfield"
	"renga.dev/renga/server/pipeline"
	"renga.dev/renga/server/problem"
)

// ListObservations pages through an installation's observations.
func (s *Server) ListObservations(ctx context.Context, req api.ListObservationsRequestObject) (api.ListObservationsResponseObject, error) {
	st := pipeline.From(ctx)
	before, err := observationPageToken(req.Params.PageToken)
	if err != nil {
		return nil, err
	}
	size := pageSize(req.Params.PageSize)
	obs, err := domain.ListObservations(ctx, s.q(ctx), st.Actor.OrganizationID, req.InstallationId, before, size+1)
	if err != nil {
		return nil, err
	}
	out := api.ObservationList{Items: []api.Observation{}}
	obs, out.NextPageToken = page(obs, size, func(o domain.Observation) string { return o.ID.String() })
	for _, o := range obs {
		// UseNumber: numbers go back with the digits they were stored with.
		var data map[string]any
		dec := json.NewDecoder(bytes.NewReader(o.Data))
		dec.UseNumber()
		if err := dec.Decode(&data); err != nil {
			return nil, err
		}
		out.Items = append(out.Items, api.Observation{Id: o.ID.String(), InstallationId: o.InstallationID,
			BatchId: o.BatchID, ObservedAt: o.ObservedAt.UTC(), ReceivedAt: o.ReceivedAt.UTC(), Kind: o.Kind, Data: data})
	}
	return api.ListObservations200JSONResponse{Body: out}, nil
}

// observationPageToken reads the list's page token (nil: the first page): as every list's, "v1:"
// and the last ID of the page before, base64url-encoded, the ID of either form an observation
// has (domain.ParseObservationID): a token a list gave before migration 00020 holds an
// obs_<n>, and pages on from it.
func observationPageToken(tok *string) (*domain.ObservationID, error) {
	if tok == nil {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(*tok)
	last, ok := strings.CutPrefix(string(b), "v1:")
	id, valid := domain.ParseObservationID(last)
	if err != nil || !ok || !valid {
		return nil, problem.New(http.StatusBadRequest, api.ErrorCodeInvalidPageToken, "page_token is not one this list returned; start again without it.")
	}
	return &id, nil
}

// SubmitObservations accepts a batch once per (installation, batch_id), within the
// organization's intake_bytes_per_day, in one statement far from the limit
// (x-renga-single-statement: the pipeline opens no transaction around it).
func (s *Server) SubmitObservations(ctx context.Context, req api.SubmitObservationsRequestObject) (api.SubmitObservationsResponseObject, error) {
	st := pipeline.From(ctx)
	h := st.Installation
	if h == nil {
		return nil, fmt.Errorf("submitObservations without an authenticated installation")
	}
	body, pe := storableBatch(st.Body, req.Body.Observations)
	if pe != nil {
		return nil, pe
	}
	// Refused here rather than by the statement: in a group, PostgreSQL's refusal would fail the
	// whole group's statement and send each of its batches again alone.
	if !domain.NumbersFitNumeric(body) {
		return nil, numberOutOfRange()
	}
	batch := domain.IntakeBatch{OrganizationID: h.Org.ID, InstallationID: h.Installation.ID, BatchID: req.Body.BatchId,
		Body: body, Bytes: int64(len(st.Body)), PublicKey: h.Installation.PublicKey, PolicyVersion: h.PolicyVersion}
	policy := h.Policy
	var fresh bool
	var err error
	for attempt := 0; ; attempt++ {
		limit := domain.Limit(policy, s.cfg.PolicyDefaults, policyfield.IntakeBytesPerDay)
		fresh, err = s.intake.Submit(ctx, batch, limit, s.intakeMargin)
		// The policy changed since it was read (perhaps long ago, into the cache): again, with
		// the limit the new one sets.
		var stale *domain.StalePolicyError
		if !errors.As(err, &stale) || attempt == 2 {
			break
		}
		policy, batch.PolicyVersion = stale.Document, stale.Version
		s.installations.SetPolicy(h.Installation.ID, stale.Version, stale.Document)
	}
	switch {
	case errors.Is(err, domain.ErrUnknownInstallation) || errors.Is(err, domain.ErrNotFound):
		// Gone (its organization purged) since the key was cached: a credential no longer valid.
		s.installations.Forget(h.Installation.ID)
		return nil, problem.New(http.StatusUnauthorized, api.ErrorCodeUnauthenticated,
			"Sign the request with the installation's key (Renga-Installation, Renga-Timestamp, Renga-Signature).")
	case isPgCode(err, pgerrcode.NumericValueOutOfRange):
		// What NumbersFitNumeric let through and PostgreSQL did not take: the same answer.
		return nil, numberOutOfRange()
	case err != nil:
		return nil, err
	}
	return api.SubmitObservations202JSONResponse{Body: api.BatchAccepted{Accepted: len(req.Body.Observations), Duplicate: !fresh}}, nil
}

// numberOutOfRange is the answer to a batch holding a number jsonb cannot: JSON numbers have no
// range; jsonb's numeric has one. Nothing is stored.
func numberOutOfRange() *problem.Error {
	pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest,
		"A number in the observations is beyond what can be stored (at most 131072 digits before the decimal point and 16383 after).")
	pe.Errors = []problem.FieldError{{Field: "observations", Message: "a number out of range"}}
	return pe
}

// storableBatch is a batch as PostgreSQL's jsonb takes it: the body as sent (numbers keep their
// digits; the statement reads its observations member), unless it holds \u escapes, which are
// re-encoded (a lone surrogate becomes U+FFFD instead of an error; NUL was refused before), or
// an observed_at whose UTC offset PostgreSQL cannot read (RFC 3339 allows up to ±23:59,
// timestamptz's input ±15:59), which is written in UTC instead: the same instant, which is all
// a timestamptz keeps. Timestamps PostgreSQL cannot hold (years outside 1..9999, in UTC for those
// written in UTC) are refused.
func storableBatch(body []byte, in []api.ObservationIn) (json.RawMessage, *problem.Error) {
	var inUTC []int // the observations whose observed_at is written in UTC
	for i, o := range in {
		at := o.ObservedAt
		if _, offset := at.Zone(); offset < -maxTimestamptzOffset || offset > maxTimestamptzOffset {
			at = at.UTC()
			inUTC = append(inUTC, i)
		}
		if y := at.Year(); y < 1 || y > 9999 {
			pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "observed_at must be an RFC 3339 time between years 1 and 9999.")
			pe.Errors = []problem.FieldError{{Field: fmt.Sprintf("observations.%d.observed_at", i), Message: "RFC 3339, years 1 to 9999"}}
			return nil, pe
		}
	}
	if len(inUTC) == 0 && !bytes.Contains(body, []byte(`\u`)) {
		return body, nil
	}
	notABatch := func() *problem.Error {
		return problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The body is not a batch of observations.")
	}
	var batch map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&batch); err != nil {
		return nil, notABatch()
	}
	if len(inUTC) > 0 {
		list, ok := batch["observations"].([]any)
		if !ok || len(list) != len(in) {
			return nil, notABatch()
		}
		for _, i := range inUTC {
			o, ok := list[i].(map[string]any)
			if !ok {
				return nil, notABatch()
			}
			o["observed_at"] = in[i].ObservedAt.UTC().Format(time.RFC3339Nano)
		}
	}
	out, err := json.Marshal(batch)
	if err != nil {
		return nil, problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The observations cannot be stored.")
	}
	return out, nil
}

// maxTimestamptzOffset is the largest UTC offset PostgreSQL's timestamptz input reads: 15:59.
const maxTimestamptzOffset = 15*3600 + 59*60

// intakeExactMargin is how close to intake_bytes_per_day an organization's intake serializes:
// what this server's intake statements can have in flight at once (one per database
// connection, at least 64, each carrying at most one batch's worth: domain.IntakeGroups) could
// add to the total read at the start of a batch's statement.
func intakeExactMargin(maxConns int32) int64 {
	return int64(max(64, maxConns)) * pipeline.MaxBodyBytes
}

// isPgCode reports whether err is a PostgreSQL error with SQLSTATE code.
func isPgCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

// intakeMetrics are intake's group commit's counts, for /metrics.
func (s *Server) intakeMetrics() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "renga_intake_statements_total",
			Help: "Intake statements sent to PostgreSQL, each its own commit."},
			func() float64 { return float64(s.intake.Stats().Statements) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "renga_intake_batches_total",
			Help: "Observation batches sent to intake's statements, each counted once (over renga_intake_statements_total: batches per statement)."},
			func() float64 { return float64(s.intake.Stats().Batches) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "renga_intake_waiting_batches",
			Help: "Batches waiting for an intake statement (RENGA_INTAKE_STATEMENTS run at once)."},
			func() float64 { return float64(s.intake.Stats().Waiting) }),
	}
}
