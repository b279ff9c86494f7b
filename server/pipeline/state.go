package pipeline

import (
	"context"
	"net/http"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/problem"
)

// State is what one request carries through the stages and into its handler: made by the access
// log stage, filled by each stage in turn, read with From.
type State struct {
	ID     string     // the request ID (X-Request-Id, logs, problem bodies, audit)
	Source netip.Addr // the caller's address (source.go)
	// sourceText is Source's text when the access stage had it without writing it (resolveSource).
	sourceText string
	// Local is set for a release command's request (LocalTransport), with its invocation ID.
	Local      bool
	Invocation string

	Op         *Operation // the routed operation
	pathParams map[string]string
	// wellFormed: every path parameter matches its pattern in the spec (Operation.wellFormed),
	// checked once for authentication's Prefetch and validation's skip (pathOnly).
	wellFormed bool
	prefetched *prefetched // the read a Prefetch made with authentication
	Actor      Actor       // who, once authenticated
	// cachedToken is the hash of the operator token the request took from the cache (tokenCache),
	// until the database confirms it.
	cachedToken []byte
	// For a signed agent request: the installation, its organization's policy and intake today.
	Installation *domain.InstallationHolder
	Body         []byte // the raw body, for handlers that need its bytes (intake)
	bodyRead     bool
	validated    any // the body's value as the validator passed it (bindableIntegers), for the handler to bind

	// Set for a write, for its handler.
	Tx      pgx.Tx // the one transaction of the write
	IfMatch int64  // the version If-Match names; -1 when the tag can never match
	Audit   AuditNote
	// TxNow is the write's transaction's now(), when the write's first round trip read it (an
	// operator token's write); in a write sent in one round trip (Operation.OneRoundTrip), the
	// server's clock when the handler ran, to the microsecond PostgreSQL keeps (as the audit
	// event's time is); zero otherwise.
	TxNow    time.Time
	deferred []deferredStatement

	// Problem is the problem the response carries, once one was written: the audit records its
	// code.
	Problem *problem.Error
}

// Actor is who makes a request.
type Actor struct {
	Type         string // domain.ActorOperatorToken, domain.ActorLocalOperator, domain.ActorUser, ...
	ID           string
	Name         string
	InvocationID string
	Scopes       []string // nil for the local operator, who holds every scope
	// CredentialID is the token or key the request authenticated with (the idempotency
	// namespace and the rate-limit bucket); "local-operator" for release commands.
	CredentialID string
	// For a member or an agent: their organization, its state when the request started, and a
	// member's role.
	OrganizationID    string
	OrganizationName  string
	OrganizationState string
	Role              string
}

// HasScope reports whether the actor may use an operation needing scope.
func (a Actor) HasScope(scope string) bool {
	switch {
	case scope == ScopePublic:
		return true
	case scope == ScopeOwner:
		return a.Type == domain.ActorUser && a.Role == "owner"
	case scope == ScopeAgent:
		return a.Type == domain.ActorIntakeKey || a.Type == domain.ActorInstallation
	case a.Type == domain.ActorUser || a.Type == domain.ActorIntakeKey || a.Type == domain.ActorInstallation:
		return false
	case scope == domain.ScopeAuthenticated || a.Type == domain.ActorLocalOperator:
		return true
	}
	return domain.HasScope(a.Scopes, scope)
}

// AuditNote is what a handler tells the pipeline about its write, for the audit event.
type AuditNote struct {
	OrganizationID   string
	OrganizationName string
	TokenID          string
	ProviderID       string
	ChangedFields    []string
}

// OwnOrganization names the actor's own organization (a member's or an agent's) as the target.
func (n *AuditNote) OwnOrganization(a Actor, changed []string) {
	n.OrganizationID, n.OrganizationName, n.ChangedFields = a.OrganizationID, a.OrganizationName, changed
}

// Target names the organization a write concerns and the fields it changed.
func (n *AuditNote) Target(o domain.Organization, changed []string) {
	n.OrganizationID, n.OrganizationName, n.ChangedFields = o.ID, o.DisplayName, changed
}

// A Prefetch queues on b, the batch that authenticates a read, the read its handler will make
// by the IDs in its path; the returned function reads the result. Both travel in one round
// trip, and the handler finds the result with Prefetched. The read runs before authentication
// has decided, but nothing of it reaches the caller unless authentication, scope and validation
// pass (the handler runs only then).
type Prefetch func(pathParams map[string]string, b *pgx.Batch) func(pgx.BatchResults) (any, error)

type prefetched struct {
	v   any
	err error
}

// Prefetched is the result of the request's Prefetch, if it made one of type T: ok is false when
// there is none, and the handler reads for itself.
func Prefetched[T any](ctx context.Context) (v T, ok bool, err error) {
	p := From(ctx).prefetched
	if p == nil {
		return v, false, nil
	}
	if p.err != nil {
		return v, true, p.err
	}
	v, ok = p.v.(T)
	return v, ok, nil
}

type stateKey struct{}

// From is the request's state. Outside the pipeline (a test calling a handler) it is empty.
func From(ctx context.Context) *State {
	if s, ok := ctx.Value(stateKey{}).(*State); ok {
		return s
	}
	return &State{}
}

// Fail writes p as the response and keeps it on the request's state, for the audit.
func Fail(w http.ResponseWriter, r *http.Request, p *problem.Error) {
	st := From(r.Context())
	st.Problem = p
	if p.Status == http.StatusUnauthorized {
		// RFC 9110 §11.6.1: a 401 names the scheme that would authenticate.
		w.Header().Set("WWW-Authenticate", challenge(st.Op))
	}
	problem.Write(w, st.ID, p)
}

// challenge is the WWW-Authenticate of a 401: the signature scheme of an installation's
// requests, a bearer credential for the others.
func challenge(op *Operation) string {
	if op != nil && op.Auth == AuthInstallation {
		return `Renga-Signature realm="renga"`
	}
	return `Bearer realm="renga"`
}

// NewInvocationID identifies one run of a release command.
func NewInvocationID() string { return db.NewID("inv") }

// A deferredStatement travels in the write's last round trip, before its stored result, audit
// event and COMMIT.
type deferredStatement struct {
	sql       string
	args      []any
	translate func(error) error
}

// Defer sends sql in the write's last round trip instead of now: a handler whose answer does
// not depend on the statement's result (a create whose row it knows in full, TxNow included)
// saves a round trip. If the last round trip fails, translate turns the error into the domain's
// (or returns it unchanged when it is not the statement's), the response the handler wrote is
// dropped, and the write is a failed attempt with no target: nothing was created.
func (st *State) Defer(sql string, args []any, translate func(error) error) {
	st.deferred = append(st.deferred, deferredStatement{sql, args, translate})
}

// setPathParams records the routed operation's path parameters, and whether they are well formed.
func (st *State) setPathParams(params map[string]string) {
	st.pathParams, st.wellFormed = params, st.Op.wellFormed(params)
}
