package pipeline

import (
	"context"
	"net/http"
	"regexp"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/problem"
)

// audited reports whether an actor's attempted writes go to the deployment audit log: every
// caller's but an installation's, whose intake and job results are the agent's routine traffic
// (counted in usage, not audited; its registration is audited as the intake key's).
func audited(a Actor) bool {
	switch a.Type {
	case domain.ActorOperatorToken, domain.ActorLocalOperator, domain.ActorUser, domain.ActorIntakeKey:
		return true
	}
	return false
}

// auditEvent is the allowlisted summary of a request's write: never bodies, headers or secrets.
func auditEvent(st *State, outcome string, status int, code api.ErrorCode) domain.AuditEvent {
	e := domain.AuditEvent{
		RequestID:     st.ID,
		ActorType:     st.Actor.Type,
		ActorID:       st.Actor.ID,
		ActorName:     st.Actor.Name,
		Operation:     st.Op.ID,
		Outcome:       outcome,
		Status:        status,
		ChangedFields: st.Audit.ChangedFields,
		SourceAddress: sourceString(st),
	}
	if st.Actor.InvocationID != "" {
		e.InvocationID = &st.Actor.InvocationID
	}
	if st.Audit.OrganizationID != "" {
		e.OrganizationID = &st.Audit.OrganizationID
		e.OrganizationNameSnapshot = &st.Audit.OrganizationName
	}
	if st.Audit.TokenID != "" {
		e.TokenID = &st.Audit.TokenID
	}
	if st.Audit.ProviderID != "" {
		e.ProviderID = &st.Audit.ProviderID
	}
	if code != "" {
		c := string(code)
		e.Error = &c
	}
	return e
}

// succeeded is the audit event of a successful write, or nil when the actor is not audited.
func succeeded(st *State, status int) *domain.AuditEvent {
	if !audited(st.Actor) {
		return nil
	}
	e := auditEvent(st, domain.OutcomeSucceeded, status, "")
	return &e
}

var (
	organizationIDPattern = regexp.MustCompile(`^org_[0-9a-z]{26}$`)
	providerIDPattern     = regexp.MustCompile(`^idp_[0-9a-z]{26}$`)
)

// auditFailure records a failed or denied attempt in its own transaction, after the attempt's
// own transaction (if any) rolled back. Its outcome is "denied" when the caller was refused
// (401, 403, or its organization moved: 410 moved), else "failed". The target is the organization the handler named, else the actor's own, else the
// one named in the path (never a rejected value).
func (p *Pipeline) auditFailure(ctx context.Context, st *State, pathParams map[string]string, pe *problem.Error) {
	if !audited(st.Actor) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	outcome := domain.OutcomeFailed
	if pe.Status == http.StatusUnauthorized || pe.Status == http.StatusForbidden || pe.Code == api.ErrorCodeMoved {
		outcome = domain.OutcomeDenied
	}
	st.Audit.ChangedFields = nil
	if st.Audit.OrganizationID == "" && st.Actor.OrganizationID != "" {
		st.Audit.OrganizationID, st.Audit.OrganizationName = st.Actor.OrganizationID, st.Actor.OrganizationName
	}
	if id := pathParams["organization_id"]; id != "" && st.Audit.OrganizationID == "" && organizationIDPattern.MatchString(id) {
		if o, err := domain.GetOrganization(ctx, p.pool, id); err == nil {
			st.Audit.OrganizationID, st.Audit.OrganizationName = id, o.DisplayName
		}
	}
	if id := pathParams["provider_id"]; id != "" && st.Audit.ProviderID == "" && providerIDPattern.MatchString(id) {
		st.Audit.ProviderID = id
	}
	e := auditEvent(st, outcome, pe.Status, pe.Code)
	if e.OrganizationID != nil && *e.OrganizationNameSnapshot == "" {
		e.OrganizationNameSnapshot = nil
	}
	if err := domain.RecordAudit(ctx, p.pool, e); err != nil {
		p.log.ErrorContext(ctx, "audit of a failed attempt not recorded", "request_id", st.ID, "error", err)
	}
}

// auditOnStatus audits an audited read's attempt when its handler writes the status: a success
// as succeeded, an error as auditFailure does; then the response goes on.
type auditOnStatus struct {
	http.ResponseWriter
	p          *Pipeline
	r          *http.Request
	st         *State
	pathParams map[string]string
	done       bool
}

func (a *auditOnStatus) WriteHeader(status int) {
	if !a.done {
		a.done = true
		if status < 400 {
			if e := succeeded(a.st, status); e != nil {
				ctx := context.WithoutCancel(a.r.Context())
				if err := domain.RecordAudit(ctx, a.p.pool, *e); err != nil {
					a.p.log.ErrorContext(ctx, "audit of a read not recorded", "request_id", a.st.ID, "error", err)
				}
			}
		} else {
			pe := a.st.Problem
			if pe == nil {
				pe = &problem.Error{Status: status}
			}
			a.p.auditFailure(a.r.Context(), a.st, a.pathParams, pe)
		}
	}
	a.ResponseWriter.WriteHeader(status)
}

func (a *auditOnStatus) Write(b []byte) (int, error) {
	if !a.done {
		a.WriteHeader(http.StatusOK)
	}
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (a *auditOnStatus) Unwrap() http.ResponseWriter { return a.ResponseWriter }
