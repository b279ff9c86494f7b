// Package pipeline is the one path every API request takes, as a sequence of stages (one file
// each): the operation table read from the spec (spec.go), authentication and rate limits
// (authn.go), body reading and validation (validate.go), Idempotency-Key (idempotency.go),
// If-Match (ifmatch.go), and for a write one transaction around its handler with its stored
// result and audit event (audit.go); the access log (accesslog.go) wraps it all. Serve lists the
// order. Handlers read what the stages established with From.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/problem"
)

// Options is what the pipeline needs of the deployment's configuration.
type Options struct {
	Development          bool // HTTPS is not required
	TrustedProxies       []netip.Prefix
	IdempotencyRetention time.Duration
	// Installations caches installations' keys for single-statement writes (intake); nil: none.
	Installations *domain.InstallationCache
	// Per-credential limit on authenticated requests (requests/s and burst); 0 disables.
	RateLimitAuthenticated      float64
	RateLimitAuthenticatedBurst int
	// Per-source-address limit on unauthenticated requests and failed authentications.
	RateLimitAnonymous      float64
	RateLimitAnonymousBurst int
	// Prefetch, by operationId: reads by ID that travel with the operator token's check.
	Prefetch map[string]Prefetch
	// RequestTimeout bounds each API request, database statements included (0: none); a
	// request past it is a 503. Streaming operations (archives) are exempt.
	RequestTimeout time.Duration
	// MaxInFlight bounds the API requests served at once (0: no bound); one more waits up to
	// InFlightWait for a slot, then gets a 503 with Retry-After.
	MaxInFlight  int
	InFlightWait time.Duration
	// Direct, by operationId: a handler that answers the operation in place of its generated
	// one, after the same stages. Only for an answer that reads nothing the generated handler
	// binds (the request was validated against the spec by then): home's constant document.
	Direct map[string]http.Handler
}

// Pipeline routes API requests (once, with a net/http ServeMux) and runs each through the stages.
// It is the router the generated code mounts its per-operation handlers on (api.ServeMux).
type Pipeline struct {
	opts    Options
	pool    *pgxpool.Pool
	log     *slog.Logger
	limits  *limiters // per credential
	anon    *limiters // per source address, for unauthenticated requests
	metrics *metrics
	slots   chan struct{}         // in-flight API requests, when bounded
	ops     map[string]*Operation // by ServeMux pattern
	tokens  *tokenCache           // operator tokens, for writes
	mux     *http.ServeMux
	// static holds the handlers of the operations whose path has no parameter, by method and
	// path: what the mux would pick for such a request (staticHandler), without its walk.
	static map[routeKey]http.Handler
	errs   []error
}

// routeKey is an operation's method and path without parameters.
type routeKey struct{ method, path string }

var _ api.ServeMux = (*Pipeline)(nil)

// New reads the operations of the embedded spec and makes an empty router; mount the generated
// handlers on it (api.HandlerWithOptions with BaseRouter), then check Err.
func New(opts Options, pool *pgxpool.Pool, log *slog.Logger) (*Pipeline, error) {
	spec, err := api.GetSpec()
	if err != nil {
		return nil, fmt.Errorf("load embedded spec: %w", err)
	}
	spec.Servers = nil // match on path only, never on Host
	ops, err := Operations(spec)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	p := &Pipeline{opts: opts, pool: pool, log: log, ops: ops, mux: http.NewServeMux(), static: map[routeKey]http.Handler{},
		metrics: newMetrics(), tokens: newTokenCache(),
		limits: newLimiters(opts.RateLimitAuthenticated, opts.RateLimitAuthenticatedBurst),
		anon:   newLimiters(opts.RateLimitAnonymous, opts.RateLimitAnonymousBurst)}
	if opts.MaxInFlight > 0 {
		p.slots = make(chan struct{}, opts.MaxInFlight)
	}
	p.mux.HandleFunc("/api/", p.unrouted)
	return p, nil
}

// HandleFunc mounts the generated handler of the operation at pattern ("METHOD /path") behind
// the stages.
func (p *Pipeline) HandleFunc(pattern string, handler func(http.ResponseWriter, *http.Request)) {
	op := p.ops[pattern]
	if op == nil {
		p.errs = append(p.errs, fmt.Errorf("no operation of the spec at %q", pattern))
		return
	}
	var h http.Handler = http.HandlerFunc(handler)
	if d := p.opts.Direct[op.ID]; d != nil {
		h, op.direct = d, true
	}
	served := p.serve(op, h)
	p.mux.Handle(pattern, served)
	if method, path, _ := strings.Cut(pattern, " "); !strings.Contains(path, "{") {
		p.static[routeKey{method, path}] = served
	}
}

// Err reports operations mounted that the spec does not have, and operations of the spec
// nothing was mounted for.
func (p *Pipeline) Err() error {
	errs := p.errs
	for id := range p.opts.Direct {
		if p.operation(id) == nil {
			errs = append(errs, fmt.Errorf("direct handler for %s: no operation of the spec", id))
		}
	}
	for id := range p.opts.Prefetch {
		if op := p.operation(id); op == nil || op.Mutation || op.Auth != AuthOperator {
			errs = append(errs, fmt.Errorf("prefetch for %s: not an operator read of the spec", id))
		}
	}
	for pattern := range p.ops {
		if _, got := p.mux.Handler(probe(pattern)); got != pattern {
			errs = append(errs, fmt.Errorf("no handler for %s", pattern))
		}
	}
	return errors.Join(errs...)
}

// operation is the operation with operationId id, or nil.
func (p *Pipeline) operation(id string) *Operation {
	for _, op := range p.ops {
		if op.ID == id {
			return op
		}
	}
	return nil
}

func probe(pattern string) *http.Request {
	method, path, _ := strings.Cut(pattern, " ")
	r, _ := http.NewRequest(method, pathParamPattern.ReplaceAllString(path, "x"), nil)
	return r
}

// ServeHTTP routes an API request.
func (p *Pipeline) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := p.staticHandler(r); h != nil {
		h.ServeHTTP(w, r)
		return
	}
	p.mux.ServeHTTP(w, r)
}

// staticHandler is the handler of the operation whose path, without parameters, is the
// request's, with the request's method: the one the mux would route it to (a pattern of literal
// segments is more specific than any other that matches its path), or nil. A path sent with
// escapes (RawPath set) is left to the mux, which matches it segment by segment as sent.
func (p *Pipeline) staticHandler(r *http.Request) http.Handler {
	if r.URL.RawPath != "" {
		return nil
	}
	return p.static[routeKey{r.Method, r.URL.Path}]
}

// MetricsHandler serves the request metrics (Prometheus).
func (p *Pipeline) MetricsHandler() http.Handler { return p.metrics.handler() }

// RegisterMetrics adds collectors to what MetricsHandler serves.
func (p *Pipeline) RegisterMetrics(cs ...prometheus.Collector) { p.metrics.reg.MustRegister(cs...) }

// serve runs a routed request through the stages, in this order:
//
//  0. Overload: a slot among the requests served at once (503 unavailable with Retry-After
//     when none frees in time), and the request's deadline, which its statements share.
//  1. HTTPS, outside development (403 https_required).
//  2. Authentication by the operation's credential path, then the per-credential rate limit
//     (401 unauthenticated, 429 rate_limited). From here on, a write's failure is audited. An
//     operator's write may take its token from the cache (tokenCache): the write's transaction
//     re-checks it first, and a request refused before that is answered only once the database
//     confirms the token (a revoked one is a 401, unaudited, as if it had been looked up).
//  3. Scope (403 insufficient_scope).
//  4. For members' writes and agents: the organization is active (403 suspended, 410 moved).
//  5. Body: size and media type (413, 415, 400); a streamed body (application/octet-stream)
//     only its media type, the handler reads it.
//  6. Idempotency-Key (400 idempotency_key_required).
//  7. Validation against the spec, leaving out the headers the pipeline checks itself (400).
//  8. A read runs its handler now (an audited read's attempt is audited when its status is
//     known, before its body streams), and so does an installation's single-statement write (its
//     domain function holds the organization in its statement). A write goes on:
//  9. If-Match (428 precondition_required; a stale or weak tag is the handler's 412).
//  10. One transaction: the credential re-checked, the key's lock and stored result (a replay, or
//     409 idempotency_key_reused) in one round trip with BEGIN; the handler; then the stored
//     result and the audit event in one round trip with COMMIT (db.WithWriteTx). An operator's
//     write marked x-renga-one-round-trip runs its handler first and sends it all in one round
//     trip, the checks first (domain.QueueWriteChecks). A failed attempt is audited afterwards,
//     in its own transaction.
func (p *Pipeline) serve(op *Operation, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != op.Method { // ServeMux routes HEAD to GET patterns; the API has no HEAD
			p.unrouted(w, r)
			return
		}
		if pe := p.admitLoad(r.Context()); pe != nil {
			Fail(w, r, pe)
			return
		}
		defer p.releaseLoad()
		// A direct answer runs no statement: nothing for a deadline to bound (the server's write
		// timeout bounds its write), and a deadline costs a timer and a context.
		if p.opts.RequestTimeout > 0 && !op.StreamedBody && !op.StreamedResponse && !op.direct {
			if sc, ok := r.Context().(*stateContext); ok {
				// The access stage's context is this request's own, and nothing else holds it yet:
				// it takes the deadline in place, without a copy of the request to carry another
				// context. It keeps it (cancelled) after the stages: a statement the request
				// started may still read it (an intake group's, db.GroupContext).
				var cancel context.CancelFunc
				sc.Context, cancel = context.WithTimeout(sc.Context, p.opts.RequestTimeout)
				defer cancel()
			} else {
				ctx, cancel := context.WithTimeout(r.Context(), p.opts.RequestTimeout)
				defer cancel()
				r = r.WithContext(ctx)
			}
		}
		st := From(r.Context())
		st.Op = op
		var pathParams map[string]string // nil for an operation without any: nothing to allocate
		if len(op.pathParams) > 0 {
			pathParams = make(map[string]string, len(op.pathParams))
		}
		for _, name := range op.pathParams {
			pathParams[name] = r.PathValue(name)
		}
		st.setPathParams(pathParams)
		if pe := p.secure(r, st); pe != nil {
			Fail(w, r, pe)
			return
		}
		if pe := p.authenticate(r, st, op.Auth); pe != nil {
			Fail(w, r, pe)
			return
		}
		key, pe := p.admit(r, st)
		if pe != nil {
			if refused := p.confirmToken(r, st); refused != nil {
				Fail(w, r, refused)
				return
			}
			if op.Mutation || op.AuditedRead {
				p.auditFailure(r.Context(), st, pathParams, pe)
			}
			Fail(w, r, pe)
			return
		}
		liftDeadlines(w, op)
		if op.AuditedRead {
			w = &auditOnStatus{ResponseWriter: w, p: p, r: r, st: st, pathParams: pathParams}
		}
		if !op.Mutation || op.SingleStatement {
			next.ServeHTTP(w, r)
			return
		}
		p.write(w, r, next, storedKey(st, key, r, pathParams), pathParams)
	})
}

// admit runs stages 3 to 9 and returns the request's Idempotency-Key, or the problem to answer.
func (p *Pipeline) admit(r *http.Request, st *State) (string, *problem.Error) {
	op := st.Op
	if !st.Actor.HasScope(op.Scope) {
		pe := problem.Newf(http.StatusForbidden, api.ErrorCodeInsufficientScope, "This operation needs the %s scope.", op.Scope)
		pe.RequiredScope = op.Scope
		return "", pe
	}
	// An organization that is not active is read-only for its members, and closed to its agents.
	// A single-statement write checks it in its own statement (its installation may have been
	// authenticated from the cache, without reading the organization).
	switch actor := st.Actor.Type; {
	case op.SingleStatement:
	case actor == domain.ActorUser || actor == domain.ActorIntakeKey || actor == domain.ActorInstallation:
		if st.Actor.Type != domain.ActorUser || op.Mutation {
			err := domain.OrganizationWritable(st.Actor.OrganizationState)
			if st.Actor.Type == domain.ActorUser && errors.Is(err, domain.ErrMoved) {
				// Its owners still read it where it was; its agents are told to go (410).
				return "", problem.New(http.StatusForbidden, api.ErrorCodeMoved,
					"This organization has moved to another deployment: it can be read here, not changed.")
			}
			if pe := problem.FromError(err); pe != nil {
				return "", pe
			}
		}
	}
	if pe := readBody(r, st); pe != nil {
		return "", pe
	}
	key, pe := idempotencyKey(r, op)
	if pe != nil {
		return "", pe
	}
	if pe := validate(r.Context(), r, st); pe != nil {
		return "", pe
	}
	if op.Mutation && op.IfMatch {
		if st.IfMatch, pe = parseIfMatch(r); pe != nil {
			return "", pe
		}
	}
	return key, nil
}

// secure is stage 1: outside development, only HTTPS (directly, or from a trusted proxy).
func (p *Pipeline) secure(r *http.Request, st *State) *problem.Error {
	if st.Local || p.opts.Development || secureRequest(r, p.opts.TrustedProxies) {
		return nil
	}
	return problem.New(http.StatusForbidden, api.ErrorCodeHttpsRequired, "This deployment accepts API requests over HTTPS only.")
}

// unrouted answers a request no operation matches: 404, or 405 with Allow when the path has
// other methods. Under the operator and owner prefixes the caller is authenticated first, so an
// anonymous caller learns nothing of the API's shape.
func (p *Pipeline) unrouted(w http.ResponseWriter, r *http.Request) {
	if !p.admitUnrouted(w, r) {
		return
	}
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := p.mux.Handler(probe); p.ops[pattern] != nil {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		Fail(w, r, problem.Newf(http.StatusMethodNotAllowed, api.ErrorCodeMethodNotAllowed, "%s is not allowed on %s.", r.Method, r.URL.Path))
		return
	}
	Fail(w, r, problem.Newf(http.StatusNotFound, api.ErrorCodeNotFound, "No operation at %s.", r.URL.Path))
}

// admitUnrouted runs, for a request no operation matches, what comes before revealing that:
// HTTPS, and authentication under the operator and owner APIs. It answers and returns false
// when the request stops there.
func (p *Pipeline) admitUnrouted(w http.ResponseWriter, r *http.Request) bool {
	st := From(r.Context())
	if pe := p.secure(r, st); pe != nil {
		Fail(w, r, pe)
		return false
	}
	if auth := authFirst(r.URL.Path); auth != "" {
		if pe := p.authenticate(r, st, auth); pe != nil {
			Fail(w, r, pe)
			return false
		}
	}
	return true
}

// AccessLog wraps the deployment's whole HTTP surface in the access log stage.
func (p *Pipeline) AccessLog(h http.Handler) http.Handler { return p.accessLog(h) }

// Public wraps a page outside the API that anyone may open (sign-in): HTTPS outside
// development, then the per-source rate limit of unauthenticated requests, as for the API's
// public operations.
func (p *Pipeline) Public(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := From(r.Context())
		pe := p.secure(r, st)
		if pe == nil {
			pe = p.anonymousLimit(st)
		}
		if pe != nil {
			Fail(w, r, pe)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// liftDeadlines removes the server's read and write deadlines for an operation whose body
// streams in (its response follows the whole body) or whose response streams out: an archive
// takes as long as it takes (the caller is authenticated and authorized by now). Elsewhere
// (the in-process transport) there is no deadline to lift.
func liftDeadlines(w http.ResponseWriter, op *Operation) {
	if !op.StreamedBody && !op.StreamedResponse {
		return
	}
	rc := http.NewResponseController(w)
	if op.StreamedBody {
		_ = rc.SetReadDeadline(time.Time{})
	}
	_ = rc.SetWriteDeadline(time.Time{})
}
