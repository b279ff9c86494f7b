package server

import (
	"context"
	"net/http"
	"net/netip"
	"strings"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
)

// Actor is who makes a request.
type Actor struct {
	Type         string // domain.ActorOperatorToken or domain.ActorLocalOperator
	ID           string
	Name         string
	InvocationID string
	Scopes       []string // nil for the local operator, who holds every scope
	// CredentialID is the token or key the request authenticated with (the idempotency
	// namespace and the rate-limit bucket); "local-operator" for release commands.
	CredentialID string
	// For a user: their organization, its state when the request started, and their role.
	OrganizationID    string
	OrganizationName  string
	OrganizationState string
	Role              string
}

// HasScope reports whether the actor may use an operation needing scope.
func (a Actor) HasScope(scope string) bool {
	switch {
	case scope == scopePublic:
		return true
	case scope == scopeOwner:
		return a.Type == domain.ActorUser && a.Role == "owner"
	case scope == scopeAgent:
		return a.Type == domain.ActorIntakeKey || a.Type == domain.ActorInstallation
	case a.Type == domain.ActorUser || a.Type == domain.ActorIntakeKey || a.Type == domain.ActorInstallation:
		return false
	case scope == domain.ScopeAuthenticated || a.Type == domain.ActorLocalOperator:
		return true
	}
	return domain.HasScope(a.Scopes, scope)
}

// auditNote is what a handler tells the pipeline about its mutation, for the audit event.
type auditNote struct {
	OrganizationID   string
	OrganizationName string
	TokenID          string
	ChangedFields    []string
}

// OwnOrganization names the actor's own organization (a member's or an agent's) as the target.
func (n *auditNote) OwnOrganization(a Actor, changed []string) {
	n.OrganizationID, n.OrganizationName, n.ChangedFields = a.OrganizationID, a.OrganizationName, changed
}

// Target names the organization a mutation concerns.
func (n *auditNote) Target(o domain.Organization) {
	n.OrganizationID, n.OrganizationName = o.ID, o.DisplayName
}

// requestState travels on the request's context through the pipeline and into handlers.
type requestState struct {
	ID      string
	Source  netip.Addr
	Actor   Actor
	Op      *operation
	Tx      pgx.Tx // set for mutations: the one transaction of the mutation path
	IfMatch int64  // expected version from If-Match; -1 when the tag can never match
	Audit   auditNote
	// For a signed agent request: the installation, its organization's policy and intake today.
	Installation *domain.InstallationHolder
	Body         []byte // the raw body, for handlers that need its bytes (intake)
}

type ctxKey int

const (
	stateKey ctxKey = iota
	localOperatorKey
)

func stateFrom(ctx context.Context) *requestState {
	if s, ok := ctx.Value(stateKey).(*requestState); ok {
		return s
	}
	return &requestState{}
}

// WithLocalOperator marks a request as coming from a release command in this process. Only the
// in-process transport calls it: nothing on the wire can put this value on a context.
func WithLocalOperator(ctx context.Context, invocationID string) context.Context {
	return context.WithValue(ctx, localOperatorKey, invocationID)
}

func localOperatorFrom(ctx context.Context) (string, bool) {
	id, ok := ctx.Value(localOperatorKey).(string)
	return id, ok
}

// LocalTransport is an http.RoundTripper that serves requests with h in this process, as the
// local operator with one invocation ID: how release commands use the generated client.
type LocalTransport struct {
	Handler      http.Handler
	InvocationID string
}

// RoundTrip implements http.RoundTripper.
func (t *LocalTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.WithContext(WithLocalOperator(r.Context(), t.InvocationID))
	rec := newRecorder()
	t.Handler.ServeHTTP(rec, r)
	return rec.response(r), nil
}

// NewInvocationID identifies one run of a release command.
func NewInvocationID() string { return db.NewID("inv") }

func newRequestID() string { return db.NewID("req") }

// resolveSource is the caller's address: the TCP peer, unless the peer is a trusted proxy; then
// X-Forwarded-For is walked from the right, skipping trusted proxies, to the first untrusted hop.
func resolveSource(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	addr := peer.Addr().Unmap()
	if !isTrusted(addr, trusted) {
		return addr
	}
	hops := forwardedFor(r.Header.Values("X-Forwarded-For"))
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(hops[i])
		if err != nil {
			// A garbled hop cannot be trusted or attributed: stop at the last trusted one.
			return addr
		}
		addr = hop.Unmap()
		if !isTrusted(addr, trusted) {
			return addr
		}
	}
	return addr
}

func forwardedFor(values []string) []string {
	var hops []string
	for _, v := range values {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hops = append(hops, h)
			}
		}
	}
	return hops
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// secureRequest reports whether the request reached the deployment over TLS: directly, or per
// X-Forwarded-Proto from a trusted proxy (the value the nearest proxy appended).
func secureRequest(r *http.Request, trusted []netip.Prefix) bool {
	if r.TLS != nil {
		return true
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !isTrusted(peer.Addr().Unmap(), trusted) {
		return false
	}
	protos := forwardedFor(r.Header.Values("X-Forwarded-Proto"))
	return len(protos) > 0 && strings.EqualFold(protos[len(protos)-1], "https")
}
