package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/jackc/pgx/v5"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/problem"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

// operation is what the pipeline knows of one operation of the spec.
type operation struct {
	ID          string
	Method      string
	Route       string // the path template, e.g. /api/v1/operator/organizations/{organization_id}
	Scope       string // x-renga-scope
	Auth        string // the credential path (authOperator, ...), from the operation's security
	Mutation    bool
	KeyRequired bool // Idempotency-Key declared required
	KeyAccepted bool // Idempotency-Key declared
	IfMatch     bool // If-Match declared
	// ChangesOwnCredential (x-renga-changes-own-credential): the operation changes the calling
	// credential, so its write takes the credential's lock exclusively from the start.
	ChangesOwnCredential bool
	// SecretFields are top-level response fields shown once (x-renga-secret-fields): never
	// stored with the idempotent result.
	SecretFields []string
	spec         *openapi3.Operation
}

// Credential paths, from an operation's security requirement.
const (
	authOperator     = "operator"     // operatorToken: /api/v1/operator
	authUser         = "user"         // userKey: /api/v1/org
	authIntake       = "intake"       // intakeKey: agent registration
	authInstallation = "installation" // installationSignature: the other agent requests
	authPublic       = "public"       // none: rate-limited per source address
)

// Scopes of the other credential paths.
const (
	scopeOwner  = "owner"
	scopeAgent  = "agent"
	scopePublic = "public"
)

// apiPrefix is where each credential path's operations live. Under the operator and owner
// prefixes, authentication comes before routing; agent and public operations are routed first.
var apiPrefix = map[string]string{authOperator: "/api/v1/operator/", authUser: "/api/v1/org/",
	authIntake: "/api/v1/agent/", authInstallation: "/api/v1/agent/"}

// authFirst reports the credential path a request's path demands before routing, or "".
func authFirst(path string) string {
	for _, a := range []string{authOperator, authUser} {
		if strings.HasPrefix(path, apiPrefix[a]) {
			return a
		}
	}
	return ""
}

// Operations reads the operations of the spec and checks each declares what the pipeline
// needs: an operationId, a known scope for its credential path, a path under that credential
// path's prefix, and an Idempotency-Key parameter on every authenticated write.
func Operations(spec *openapi3.T) (map[*openapi3.Operation]*operation, error) {
	ops := map[*openapi3.Operation]*operation{}
	var errs []error
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			// The generated package embeds the spec with operationIds capitalized; audit
			// records them as openapi.yaml spells them (lowerCamelCase).
			o := &operation{ID: lowerFirst(op.OperationID), Method: method, Route: path, spec: op,
				Mutation: method != http.MethodGet && method != http.MethodHead}
			// A GET that changes state (an agent fetching its jobs marks them delivered) says so,
			// and takes the mutation path.
			if m, ok := op.Extensions["x-renga-mutation"].(bool); ok && m {
				o.Mutation = true
			}
			o.ChangesOwnCredential, _ = op.Extensions["x-renga-changes-own-credential"].(bool)
			security := spec.Security
			if op.Security != nil {
				security = *op.Security
			}
			switch {
			case len(security) == 0:
				o.Auth = authPublic
			case len(security) == 1 && len(security[0]) == 1 && security[0]["operatorToken"] != nil:
				o.Auth = authOperator
			case len(security) == 1 && len(security[0]) == 1 && security[0]["userKey"] != nil:
				o.Auth = authUser
			case len(security) == 1 && len(security[0]) == 1 && security[0]["intakeKey"] != nil:
				o.Auth = authIntake
			case len(security) == 1 && len(security[0]) == 1 && security[0]["installationSignature"] != nil:
				o.Auth = authInstallation
			default:
				errs = append(errs, fmt.Errorf("%s %s: security must be operatorToken, userKey or none", method, path))
			}
			scope, _ := op.Extensions["x-renga-scope"].(string)
			switch o.Auth {
			case authOperator:
				if scope != domain.ScopeAuthenticated && !contains(domain.Scopes, scope) {
					errs = append(errs, fmt.Errorf("%s %s: x-renga-scope %q is not a known operator scope", method, path, scope))
				}
			case authUser:
				if scope != scopeOwner {
					errs = append(errs, fmt.Errorf("%s %s: x-renga-scope of an owner operation must be %q", method, path, scopeOwner))
				}
			case authIntake, authInstallation:
				if scope != scopeAgent {
					errs = append(errs, fmt.Errorf("%s %s: x-renga-scope of an agent operation must be %q", method, path, scopeAgent))
				}
			case authPublic:
				if scope != scopePublic {
					errs = append(errs, fmt.Errorf("%s %s: x-renga-scope of an unauthenticated operation must be %q", method, path, scopePublic))
				}
			}
			if prefix := apiPrefix[o.Auth]; prefix != "" && !strings.HasPrefix(path, prefix) {
				errs = append(errs, fmt.Errorf("%s %s: %s operations live under %s", method, path, o.Auth, prefix))
			}
			if first := authFirst(path); first != "" && first != o.Auth {
				errs = append(errs, fmt.Errorf("%s %s: only %s operations live under %s", method, path, first, apiPrefix[first]))
			}
			o.Scope = scope
			if fields, ok := op.Extensions["x-renga-secret-fields"].([]any); ok {
				for _, f := range fields {
					if name, ok := f.(string); ok {
						o.SecretFields = append(o.SecretFields, name)
					}
				}
			}
			if o.ID == "" {
				errs = append(errs, fmt.Errorf("%s %s: no operationId", method, path))
			}
			for _, p := range append(append(openapi3.Parameters{}, item.Parameters...), op.Parameters...) {
				if p.Value == nil || p.Value.In != openapi3.ParameterInHeader {
					continue
				}
				switch http.CanonicalHeaderKey(p.Value.Name) {
				case "Idempotency-Key":
					o.KeyAccepted, o.KeyRequired = true, p.Value.Required
				case "If-Match":
					o.IfMatch = true
				}
			}
			// Agents' writes are idempotent by their own IDs (installation, batch, job).
			if o.Mutation && (o.Auth == authOperator || o.Auth == authUser) && !o.KeyAccepted {
				errs = append(errs, fmt.Errorf("%s %s: a write must declare the Idempotency-Key header", method, path))
			}
			ops[op] = o
		}
	}
	return ops, errors.Join(errs...)
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// pipeline is the one path every API request takes: HTTPS check, authentication, scope, request
// validation, Idempotency-Key, If-Match, then (for writes) the handler inside one transaction
// with its audit event and stored idempotent result.
type pipeline struct {
	s      *Server
	router routers.Router
	ops    map[*openapi3.Operation]*operation
	next   http.Handler // the generated strict handler
}

func newPipeline(s *Server, next http.Handler) (*pipeline, error) {
	spec, err := api.GetSpec()
	if err != nil {
		return nil, fmt.Errorf("load embedded spec: %w", err)
	}
	spec.Servers = nil // match on path only, never on Host
	ops, err := Operations(spec)
	if err != nil {
		return nil, fmt.Errorf("spec: %w", err)
	}
	router, err := gorillamux.NewRouter(spec)
	if err != nil {
		return nil, fmt.Errorf("spec router: %w", err)
	}
	return &pipeline{s: s, router: router, ops: ops, next: next}, nil
}

func (p *pipeline) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st := stateFrom(ctx) // made by the outer handler (logRequests)
	fail := func(pe *problem.Error) { problem.Write(w, st.ID, pe) }

	invocation, local := localOperatorFrom(ctx)
	if !local && !p.s.cfg.Development() && !secureRequest(r, p.s.cfg.TrustedProxies) {
		fail(problem.New(http.StatusForbidden, api.ErrorCodeHttpsRequired, "This deployment accepts API requests over HTTPS only."))
		return
	}
	// Under the operator and owner APIs, authentication comes before routing, so that an
	// anonymous caller learns nothing of their shape. Agent and public operations are public
	// in shape: they are routed first, then authenticated as their operation says.
	auth := authFirst(r.URL.Path)
	if auth != "" {
		if pe := p.authenticate(r, st, auth, local, invocation); pe != nil {
			fail(pe)
			return
		}
	}
	route, pathParams, err := p.router.FindRoute(r)
	switch {
	case errors.Is(err, routers.ErrMethodNotAllowed):
		w.Header().Set("Allow", strings.Join(p.allowed(r), ", "))
		fail(problem.Newf(http.StatusMethodNotAllowed, api.ErrorCodeMethodNotAllowed, "%s is not allowed on %s.", r.Method, r.URL.Path))
		return
	case err != nil:
		fail(problem.Newf(http.StatusNotFound, api.ErrorCodeNotFound, "No operation at %s.", r.URL.Path))
		return
	}
	op := p.ops[route.Operation]
	st.Op = op
	if auth == "" {
		if pe := p.authenticate(r, st, op.Auth, local, invocation); pe != nil {
			fail(pe)
			return
		}
	}

	// From here on, a write's failure is an attempted mutation: it is audited.
	reject := func(pe *problem.Error, outcome string) {
		if op.Mutation {
			p.auditFailure(ctx, st, pathParams, outcome, pe.Status, pe.Code)
		}
		fail(pe)
	}

	if !st.Actor.HasScope(op.Scope) {
		pe := problem.Newf(http.StatusForbidden, api.ErrorCodeInsufficientScope, "This operation needs the %s scope.", op.Scope)
		pe.RequiredScope = op.Scope
		reject(pe, domain.OutcomeDenied)
		return
	}
	// An organization that is not active is read-only for its members, and closed to its agents.
	if (st.Actor.Type == domain.ActorUser && op.Mutation) || st.Actor.Type == domain.ActorIntakeKey || st.Actor.Type == domain.ActorInstallation {
		if pe := orgWriteProblem(st.Actor.OrganizationState); pe != nil {
			reject(pe, domain.OutcomeDenied)
			return
		}
	}

	body, pe := readBody(r, op)
	if pe != nil {
		reject(pe, domain.OutcomeFailed)
		return
	}
	st.Body = body
	key, pe := idempotencyKey(r, op)
	if pe != nil {
		reject(pe, domain.OutcomeFailed)
		return
	}
	ifMatch, hasIfMatch := r.Header.Get("If-Match"), r.Header.Values("If-Match") != nil
	if op.IfMatch && !hasIfMatch {
		// Validate as if a tag were present, so that a bad body is reported before the
		// missing precondition (the documented order of checks).
		r.Header.Set("If-Match", `"0"`)
	}
	if pe := validate(ctx, r, route, pathParams, body); pe != nil {
		reject(pe, domain.OutcomeFailed)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))

	if !op.Mutation {
		p.next.ServeHTTP(w, r)
		return
	}

	if op.IfMatch {
		version, pe := parseIfMatch(ifMatch, hasIfMatch)
		if pe != nil {
			reject(pe, domain.OutcomeFailed)
			return
		}
		st.IfMatch = version
		r.Header.Set("If-Match", ifMatch)
	}
	p.mutate(w, r, st, pathParams, body, key)
}

var organizationIDPattern = regexp.MustCompile(`^org_[0-9a-z]{26}$`)

// sourceBucket is the rate-limit key of a source address: the address for IPv4, its /64 for
// IPv6 (one host commonly holds a whole /64).
func sourceBucket(a netip.Addr) string {
	if a.Is6() && !a.Is4In6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// audited reports whether an actor's attempted mutations go to the deployment audit log: every
// caller's but an installation's, whose intake and job results are the agent's routine traffic
// (counted in usage, not audited; its registration is audited as the intake key's).
func audited(a Actor) bool {
	switch a.Type {
	case domain.ActorOperatorToken, domain.ActorLocalOperator, domain.ActorUser, domain.ActorIntakeKey:
		return true
	}
	return false
}

// orgWriteProblem is why an organization in state refuses its members' writes, or nil.
func orgWriteProblem(state string) *problem.Error {
	switch state {
	case domain.StateActive:
		return nil
	case domain.StateMoved:
		return problem.New(http.StatusGone, api.ErrorCodeMoved, "This organization has moved to another deployment.")
	default:
		return problem.New(http.StatusForbidden, api.ErrorCodeSuspended, "This organization is suspended or being deleted: it can be read, not changed.")
	}
}

// allowed lists the methods the spec defines at the request's path (for 405's Allow header).
func (p *pipeline) allowed(r *http.Request) []string {
	var methods []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, _, err := p.router.FindRoute(probe); err == nil {
			methods = append(methods, m)
		}
	}
	return methods
}

// authenticate establishes the actor for credential path auth, or returns the problem to answer.
func (p *pipeline) authenticate(r *http.Request, st *requestState, auth string, local bool, invocation string) *problem.Error {
	ctx := r.Context()
	if local && auth != authUser && auth != authIntake && auth != authInstallation {
		st.Actor = Actor{Type: domain.ActorLocalOperator, ID: domain.LocalOperatorID, Name: domain.LocalOperatorID,
			CredentialID: domain.LocalOperatorID, InvocationID: invocation}
		return nil
	}
	anonymousLimit := func() *problem.Error {
		if p.s.anon.allow(sourceBucket(st.Source)) {
			return nil
		}
		pe := problem.New(http.StatusTooManyRequests, api.ErrorCodeRateLimited, "Too many unauthenticated requests from this address; slow down.")
		pe.RetryAfter = p.s.anon.retryAfter()
		return pe
	}
	if auth == authPublic {
		return anonymousLimit()
	}
	var actor Actor
	ok := false
	detail := ""
	if !local {
		switch auth {
		case authOperator:
			actor, ok = p.s.authenticate(ctx, r, st.Source)
			detail = "Send a valid operator token: Authorization: Bearer renga_operator_..."
		case authUser:
			actor, ok = p.s.authenticateUser(ctx, r)
			detail = "Send a valid personal API key: Authorization: Bearer renga_user_..."
		case authIntake:
			actor, ok = p.s.authenticateIntakeKey(ctx, r)
			detail = "Send a valid intake key: Authorization: Bearer renga_intake_..."
		case authInstallation:
			// The signature covers the body: read it (bounded) first.
			body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return problem.Newf(http.StatusRequestEntityTooLarge, api.ErrorCodePayloadTooLarge, "The body exceeds %d bytes.", MaxBodyBytes)
			}
			if err != nil {
				return problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The body could not be read.")
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			actor, ok = p.s.authenticateInstallation(ctx, r, st, body)
			detail = "Sign the request with the installation's key (Renga-Installation, Renga-Timestamp, Renga-Signature)."
		}
	}
	if !ok {
		// A request that fails authentication is an unauthenticated request: limited per
		// source address, so guessing credentials is slow.
		if pe := anonymousLimit(); pe != nil {
			return pe
		}
		return problem.New(http.StatusUnauthorized, api.ErrorCodeUnauthenticated, detail)
	}
	st.Actor = actor
	if !p.s.limits.allow(actor.CredentialID) {
		pe := problem.New(http.StatusTooManyRequests, api.ErrorCodeRateLimited, "This credential sends more requests than the deployment allows; slow down.")
		pe.RetryAfter = p.s.limits.retryAfter()
		return pe
	}
	return nil
}

// mutate runs a write in one transaction: the idempotency record, the change and its audit
// event commit together, or nothing does.
func (p *pipeline) mutate(w http.ResponseWriter, r *http.Request, st *requestState, pathParams map[string]string, body []byte, key string) {
	ctx := r.Context()
	op := st.Op
	var k *storedKey
	if key != "" {
		k = &storedKey{actorID: st.Actor.CredentialID, method: op.Method, route: op.Route, keyHash: domain.HashSecret(key),
			digest: requestDigest(op, pathParams, r.URL.Query(), r.Header.Get("If-Match"), body)}
	}
	rec := newRecorder()
	var replay *storedResponse
	var closed *problem.Error
	err := db.WithTx(ctx, p.s.pool, func(tx pgx.Tx) error {
		stored, err := begin(ctx, tx, st, k)
		if err != nil {
			return err
		}
		if stored != nil {
			replay = stored
			return errReplay
		}
		st.Tx = tx
		defer func() { st.Tx = nil }()
		p.next.ServeHTTP(rec, r)
		status := rec.code()
		if status >= 400 {
			return errHandlerFailed
		}
		// The stored result and the audit event go in one round trip.
		batch := &pgx.Batch{}
		if k != nil {
			expires := time.Now().Add(p.s.cfg.IdempotencyRetention).UTC().Truncate(time.Second)
			rec.header.Set("Idempotency-Expires", expires.Format(time.RFC3339))
			stored, err := withoutSecrets(rec.body.Bytes(), op.SecretFields)
			if err != nil {
				return err
			}
			sql, args, err := k.storeStatement(status, rec.header, stored, expires)
			if err != nil {
				return err
			}
			batch.Queue(sql, args...)
		}
		if audited(st.Actor) {
			sql, args := domain.AuditStatement(p.auditEvent(st, domain.OutcomeSucceeded, status, ""))
			batch.Queue(sql, args...)
		}
		if batch.Len() == 0 {
			return nil
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	switch {
	case err == nil:
		rec.flush(w)
	case errors.Is(err, errCredentialGone):
		// Authenticated when it arrived: its failed attempt is audited.
		pe := problem.New(http.StatusUnauthorized, api.ErrorCodeUnauthenticated, "The credential was revoked or expired.")
		p.auditFailure(ctx, st, pathParams, domain.OutcomeDenied, pe.Status, pe.Code)
		problem.Write(w, st.ID, pe)
	case errors.As(err, &closed):
		p.auditFailure(ctx, st, pathParams, domain.OutcomeDenied, closed.Status, closed.Code)
		problem.Write(w, st.ID, closed)
	case errors.Is(err, errReplay):
		if !bytes.Equal(replay.digest, k.digest) {
			pe := problem.New(http.StatusConflict, api.ErrorCodeIdempotencyKeyReused,
				"This Idempotency-Key was used for a different request; use a new key for a new request.")
			w.Header().Set("Idempotency-Expires", replay.expires.UTC().Format(time.RFC3339))
			p.auditFailure(ctx, st, pathParams, domain.OutcomeFailed, pe.Status, pe.Code)
			problem.Write(w, st.ID, pe)
			return
		}
		replay.write(w)
	case errors.Is(err, errHandlerFailed):
		code := problemCode(rec.body.Bytes())
		outcome := domain.OutcomeFailed
		if rec.code() == http.StatusForbidden {
			outcome = domain.OutcomeDenied
		}
		p.auditFailure(ctx, st, pathParams, outcome, rec.code(), code)
		rec.flush(w)
	default:
		p.s.log.ErrorContext(ctx, "mutation failed", "request_id", st.ID, "operation", op.ID, "error", err)
		pe := problem.Internal()
		p.auditFailure(ctx, st, pathParams, domain.OutcomeFailed, pe.Status, pe.Code)
		problem.Write(w, st.ID, pe)
	}
}

var (
	errCredentialGone = errors.New("credential revoked or expired during the request")
	errReplay         = errors.New("stored response")
	errHandlerFailed  = errors.New("handler answered with an error")
)

func problemCode(b []byte) api.ErrorCode {
	var body struct {
		Error api.ErrorCode `json:"error"`
	}
	_ = json.Unmarshal(b, &body)
	return body.Error
}

func (p *pipeline) auditEvent(st *requestState, outcome string, status int, code api.ErrorCode) domain.AuditEvent {
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
	if code != "" {
		c := string(code)
		e.Error = &c
	}
	return e
}

func sourceString(st *requestState) string {
	if st.Actor.Type == domain.ActorLocalOperator {
		return "local"
	}
	if !st.Source.IsValid() {
		return "unknown"
	}
	return st.Source.String()
}

// auditFailure records a failed or denied attempt in its own transaction, after the attempt's
// own transaction (if any) rolled back. The organization named in the path is the target.
func (p *pipeline) auditFailure(ctx context.Context, st *requestState, pathParams map[string]string, outcome string, status int, code api.ErrorCode) {
	if !audited(st.Actor) {
		return
	}
	ctx = context.WithoutCancel(ctx)
	st.Audit.ChangedFields = nil
	if st.Audit.OrganizationID == "" && st.Actor.OrganizationID != "" {
		st.Audit.OrganizationID, st.Audit.OrganizationName = st.Actor.OrganizationID, st.Actor.OrganizationName
	}
	// The organization named in the path is the target, if it is one (never a rejected value).
	if id := pathParams["organization_id"]; id != "" && st.Audit.OrganizationID == "" && organizationIDPattern.MatchString(id) {
		if o, err := domain.GetOrganization(ctx, p.s.pool, id); err == nil {
			st.Audit.OrganizationID, st.Audit.OrganizationName = id, o.DisplayName
		}
	}
	e := p.auditEvent(st, outcome, status, code)
	if e.OrganizationID != nil && *e.OrganizationNameSnapshot == "" {
		e.OrganizationNameSnapshot = nil
	}
	if err := domain.RecordAudit(ctx, p.s.pool, e); err != nil {
		p.s.log.ErrorContext(ctx, "audit of a failed attempt not recorded", "request_id", st.ID, "error", err)
	}
}

// readBody reads at most MaxBodyBytes and checks the media type against the operation's.
func readBody(r *http.Request, op *operation) ([]byte, *problem.Error) {
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, problem.Newf(http.StatusRequestEntityTooLarge, api.ErrorCodePayloadTooLarge, "The body exceeds %d bytes.", MaxBodyBytes)
		}
		return nil, problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The body could not be read.")
	}
	if len(body) == 0 || op.spec.RequestBody == nil || op.spec.RequestBody.Value == nil {
		return body, nil
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || op.spec.RequestBody.Value.Content.Get(mt) == nil || op.spec.RequestBody.Value.Content[mt] == nil {
		return nil, problem.Newf(http.StatusUnsupportedMediaType, api.ErrorCodeUnsupportedMediaType,
			"Send the body as %s.", strings.Join(mediaTypes(op.spec.RequestBody.Value.Content), " or "))
	}
	// The validator decodes the first JSON value only; anything after it must not be ignored.
	if mt == "application/json" && !json.Valid(body) {
		pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The body is not one valid JSON document.")
		pe.Errors = []problem.FieldError{{Field: "body", Message: "malformed JSON"}}
		return nil, pe
	}
	return body, nil
}

func mediaTypes(c openapi3.Content) []string {
	var out []string
	for k := range c {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// idempotencyKey returns the request's key (unquoted from a structured-field string), or a
// problem when the operation requires one and none was sent.
func idempotencyKey(r *http.Request, op *operation) (string, *problem.Error) {
	values := r.Header.Values("Idempotency-Key")
	if len(values) == 0 {
		if op.KeyRequired {
			return "", problem.New(http.StatusBadRequest, api.ErrorCodeIdempotencyKeyRequired,
				"This operation needs an Idempotency-Key header (1 to 255 printable ASCII characters), so that a retry cannot repeat it.")
		}
		return "", nil
	}
	if !op.KeyAccepted {
		return "", nil
	}
	bad := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest,
		"Idempotency-Key must be one header of 1 to 255 printable ASCII characters.")
	bad.Errors = []problem.FieldError{{Field: "Idempotency-Key", Message: "1 to 255 printable ASCII characters"}}
	if len(values) > 1 {
		return "", bad
	}
	v := values[0]
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		unq, ok := unquoteSFString(v)
		if !ok {
			return "", bad
		}
		v = unq
	}
	if len(v) < 1 || len(v) > 255 {
		return "", bad
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return "", bad
		}
	}
	return v, nil
}

// unquoteSFString decodes an RFC 8941 string: only \" and \\ are escapes.
func unquoteSFString(s string) (string, bool) {
	s = s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 >= len(s) || (s[i+1] != '"' && s[i+1] != '\\') {
				return "", false
			}
			i++
			b.WriteByte(s[i])
		case '"':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// parseIfMatch returns the version a strong tag names; a weak or malformed tag gets -1, which no
// stored version equals, so the write fails with 412 and the current version.
func parseIfMatch(v string, present bool) (int64, *problem.Error) {
	v = strings.TrimSpace(v)
	if !present || v == "" || v == "*" {
		return 0, problem.New(http.StatusPreconditionRequired, api.ErrorCodePreconditionRequired,
			`Send If-Match with the version you last read, e.g. If-Match: "3" (the ETag of a GET); "*" is not accepted.`)
	}
	if len(v) >= 3 && v[0] == '"' && v[len(v)-1] == '"' {
		if n, err := strconv.ParseInt(v[1:len(v)-1], 10, 64); err == nil && n > 0 {
			return n, nil
		}
	}
	return -1, nil
}

// storable reports whether text can be stored as PostgreSQL text: valid UTF-8 without NUL
// (which no schema of the spec can express, and which would otherwise fail in the database).
func storable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// unstorable finds request text PostgreSQL could not store, naming where it is.
func unstorable(r *http.Request, pathParams map[string]string, body []byte) *problem.Error {
	bad := func(field string) *problem.Error {
		pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The request contains text that is not valid UTF-8 or contains NUL.")
		pe.Errors = []problem.FieldError{{Field: field, Message: "must be valid UTF-8 without NUL characters"}}
		return pe
	}
	for name, v := range pathParams {
		if !storable(v) {
			return bad(name)
		}
	}
	for name, vs := range r.URL.Query() {
		for _, v := range vs {
			if !storable(name) || !storable(v) {
				return bad(name)
			}
		}
	}
	if !utf8.Valid(body) {
		return bad("body")
	}
	// In JSON, NUL and lone surrogates hide behind escapes: decode, then look at every string
	// (keys too). A lone surrogate decodes to U+FFFD, which is storable; a handler that passes
	// raw JSON to PostgreSQL re-encodes it (see SubmitObservations).
	if len(body) > 0 && bytes.Contains(body, []byte(`\u`)) {
		var v any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if dec.Decode(&v) == nil && !storableJSON(v) {
			return bad("body")
		}
	}
	return nil
}

func storableJSON(v any) bool {
	switch t := v.(type) {
	case string:
		return storable(t)
	case []any:
		for _, e := range t {
			if !storableJSON(e) {
				return false
			}
		}
	case map[string]any:
		for k, e := range t {
			if !storable(k) || !storableJSON(e) {
				return false
			}
		}
	}
	return true
}

// validate checks the request against the spec and lists each bad field.
func validate(ctx context.Context, r *http.Request, route *routers.Route, pathParams map[string]string, body []byte) *problem.Error {
	if pe := unstorable(r, pathParams, body); pe != nil {
		return pe
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	err := openapi3filter.ValidateRequest(ctx, &openapi3filter.RequestValidationInput{
		Request: r, PathParams: pathParams, Route: route,
		Options: &openapi3filter.Options{MultiError: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	})
	if err == nil {
		return nil
	}
	pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The request does not match the API description; see errors.")
	pe.Errors = fieldErrors(err, "")
	if len(pe.Errors) == 0 {
		pe.Errors = []problem.FieldError{{Field: "", Message: "invalid request"}}
	}
	return pe
}

func fieldErrors(err error, field string) []problem.FieldError {
	// Walk the concrete error tree (not errors.As, which would skip past the RequestError that
	// names the parameter to the errors inside it).
	switch e := err.(type) { //nolint:errorlint // walking the concrete tree is the point (see above)
	case openapi3.MultiError:
		var out []problem.FieldError
		for _, inner := range e {
			out = append(out, fieldErrors(inner, field)...)
		}
		return out
	case *openapi3filter.RequestError:
		switch {
		case e.Parameter != nil:
			field = e.Parameter.Name
		case e.RequestBody != nil:
			field = "body"
		}
		if e.Err != nil {
			if inner := fieldErrors(e.Err, field); len(inner) > 0 {
				return inner
			}
		}
		return []problem.FieldError{{Field: field, Message: e.Reason}}
	case *openapi3.SchemaError:
		f := field
		if ptr := e.JSONPointer(); len(ptr) > 0 {
			if f == "body" {
				f = ""
			} else if f != "" {
				f += "."
			}
			f += strings.Join(ptr, ".")
		}
		return []problem.FieldError{{Field: f, Message: e.Reason}}
	case *openapi3filter.ParseError:
		return []problem.FieldError{{Field: field, Message: "malformed value"}}
	}
	if u, ok := err.(interface{ Unwrap() error }); ok && u.Unwrap() != nil {
		return fieldErrors(u.Unwrap(), field)
	}
	return []problem.FieldError{{Field: field, Message: "invalid value"}}
}

// storedKey is one idempotency record's identity.
type storedKey struct {
	actorID, method, route string
	keyHash, digest        []byte
}

type storedResponse struct {
	digest  []byte
	status  int
	headers map[string]string
	body    []byte
	expires time.Time
}

// begin opens the mutation, in one round trip: it checks the caller's credential is still
// valid and holds it (FOR SHARE) until commit, so a revocation cannot commit in between and
// the write still land; then, for a keyed request, it takes the key's transaction-scoped
// advisory lock (a concurrent duplicate waits for the first to commit or roll back) and reads
// the stored result. The read is its own statement after the lock: a statement's snapshot is
// taken when it starts, so reading in the locking statement would miss a row committed while
// it waited.
func begin(ctx context.Context, tx pgx.Tx, st *requestState, k *storedKey) (*storedResponse, error) {
	actor := st.Actor
	batch := &pgx.Batch{}
	checked := true
	switch actor.Type {
	case domain.ActorOperatorToken:
		// A write holds its token's advisory lock, shared, until it commits; a revocation takes
		// it exclusively (domain.RevokeToken), so it waits for writes in flight and writes after
		// it see it. (An advisory lock, not a row lock: many writes of one token would otherwise
		// each write a row lock to the token's row.) The check reads after the lock.
		lock := `SELECT pg_advisory_xact_lock_shared($1)`
		if st.Op != nil && st.Op.ChangesOwnCredential {
			lock = `SELECT pg_advisory_xact_lock($1)` // it will revoke: exclusive at once, no upgrade
		}
		batch.Queue(lock, domain.TokenLockKey(actor.CredentialID))
		batch.Queue(`SELECT count(*) FROM operator_tokens WHERE id = $1 AND revoked_at IS NULL
			AND (expires_at IS NULL OR expires_at > now())`, actor.CredentialID)
	case domain.ActorUser, domain.ActorIntakeKey, domain.ActorInstallation:
		// A member's or agent's write needs the organization active until commit: holding its
		// row, first, makes a suspension, deletion or purge wait for the write, or the write see
		// it (and keeps the lock order: organization, then what belongs to it). Members' writes
		// and registrations are few and some lock the row for update themselves (limits): they
		// take that lock now, since upgrading a shared lock would deadlock. Intake, the bulk,
		// shares it.
		mode := "FOR NO KEY UPDATE"
		if actor.Type == domain.ActorInstallation {
			mode = "FOR SHARE"
		}
		batch.Queue(`SELECT state FROM organizations WHERE id = $1 `+mode, actor.OrganizationID)
		switch actor.Type {
		case domain.ActorUser:
			batch.Queue(`SELECT count(*) FROM (SELECT 1 FROM user_api_keys WHERE id = $1 AND revoked_at IS NULL FOR SHARE) t`, actor.CredentialID)
		case domain.ActorIntakeKey:
			batch.Queue(`SELECT count(*) FROM (SELECT 1 FROM intake_keys WHERE id = $1 AND revoked_at IS NULL FOR SHARE) t`, actor.CredentialID)
		default:
			checked = false // an installation's identity cannot be revoked
			// Intake checks intake_bytes_per_day against the total as of this transaction.
			batch.Queue(`SELECT coalesce(sum(intake_bytes), 0)::bigint FROM usage_counters
				WHERE organization_id = $1 AND day = (now() AT TIME ZONE 'UTC')::date`, actor.OrganizationID)
		}
	default:
		checked = false // the local operator, or an unauthenticated operation
	}
	if k != nil {
		h := sha256.New()
		for _, part := range []string{k.actorID, k.method, k.route} {
			h.Write([]byte(part))
			h.Write([]byte{0})
		}
		h.Write(k.keyHash)
		batch.Queue(`SELECT pg_advisory_xact_lock($1)`, int64(binary.BigEndian.Uint64(h.Sum(nil)[:8])))
		batch.Queue(`SELECT request_digest, status, headers, body, expires_at FROM idempotency_keys
			WHERE actor_id = $1 AND method = $2 AND route = $3 AND key_hash = $4 AND expires_at > now()`,
			k.actorID, k.method, k.route, k.keyHash)
	}
	if batch.Len() == 0 {
		return nil, nil
	}
	br := tx.SendBatch(ctx, batch)
	defer func() { _ = br.Close() }()
	if actor.Type == domain.ActorOperatorToken {
		if _, err := br.Exec(); err != nil { // the token's advisory lock
			return nil, err
		}
	}
	var closed *problem.Error
	switch actor.Type {
	case domain.ActorUser, domain.ActorIntakeKey, domain.ActorInstallation:
		var state string
		if err := br.QueryRow().Scan(&state); err != nil {
			return nil, db.Translate(err)
		}
		closed = orgWriteProblem(state)
	}
	if actor.Type == domain.ActorInstallation && st.Installation != nil {
		if err := br.QueryRow().Scan(&st.Installation.IntakeToday); err != nil {
			return nil, err
		}
	}
	if checked {
		var n int
		if err := br.QueryRow().Scan(&n); err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, errCredentialGone
		}
	}
	if closed != nil {
		return nil, closed
	}
	if k == nil {
		return nil, br.Close()
	}
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	var s storedResponse
	var headers []byte
	err := br.QueryRow().Scan(&s.digest, &s.status, &headers, &s.body, &s.expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, br.Close()
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(headers, &s.headers); err != nil {
		return nil, err
	}
	return &s, br.Close()
}

// withoutSecrets removes the fields shown once from a JSON body before it is stored.
func withoutSecrets(body []byte, fields []string) ([]byte, error) {
	if len(fields) == 0 {
		return body, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, err
	}
	for _, f := range fields {
		delete(m, f)
	}
	out, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// storedHeaders are the response headers a replay repeats.
var storedHeaders = []string{"Content-Type", "Location", "ETag", "Idempotency-Expires"}

func (k *storedKey) storeStatement(status int, h http.Header, body []byte, expires time.Time) (string, []any, error) {
	if body == nil {
		body = []byte{} // a bodiless response (204) is stored as an empty body, not NULL
	}
	headers := map[string]string{}
	for _, name := range storedHeaders {
		if v := h.Get(name); v != "" {
			headers[name] = v
		}
	}
	hj, err := json.Marshal(headers)
	if err != nil {
		return "", nil, err
	}
	// An expired record with the same key may still be there until the retention job runs.
	return `INSERT INTO idempotency_keys (actor_id, method, route, key_hash, request_digest, status, headers, body, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (actor_id, method, route, key_hash) DO UPDATE SET request_digest = excluded.request_digest,
		  status = excluded.status, headers = excluded.headers, body = excluded.body,
		  created_at = now(), expires_at = excluded.expires_at`,
		[]any{k.actorID, k.method, k.route, k.keyHash, k.digest, status, hj, body, expires}, nil
}

func (s *storedResponse) write(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range s.headers {
		h.Set(k, v)
	}
	h.Set("Idempotent-Replayed", "true")
	w.WriteHeader(s.status)
	_, _ = w.Write(s.body)
}

// requestDigest is SHA-256 over the normalized request: route, path parameters, sorted query,
// If-Match and the body re-serialized canonically (keys sorted, insignificant space dropped).
func requestDigest(op *operation, pathParams map[string]string, query url.Values, ifMatch string, body []byte) []byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", op.Method, op.Route)
	names := make([]string, 0, len(pathParams))
	for k := range pathParams {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(h, "%s=%s\n", k, pathParams[k])
	}
	fmt.Fprintf(h, "%s\n%s\n", query.Encode(), strings.TrimSpace(ifMatch))
	h.Write(canonicalJSON(body))
	return h.Sum(nil)
}

func canonicalJSON(body []byte) []byte {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return body
	}
	out, err := json.Marshal(v)
	if err != nil {
		return body
	}
	return out
}

// logRequests writes one line per request: never headers, bodies or credentials.
func logRequests(log *slog.Logger, m *metrics, trusted []netip.Prefix, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		st := &requestState{ID: newRequestID(), Source: resolveSource(r, trusted)}
		r = r.WithContext(context.WithValue(r.Context(), stateKey, st))
		w.Header().Set("X-Request-Id", st.ID)
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		opID, route := "", ""
		if st.Op != nil {
			opID, route = st.Op.ID, st.Op.Route
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		m.observe(opID, status, time.Since(start))
		log.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("request_id", st.ID),
			slog.String("method", r.Method), slog.String("route", route), slog.String("operation", opID),
			slog.Int("status", status), slog.Duration("duration", time.Since(start)),
			slog.String("actor", st.Actor.ID), slog.String("source", sourceString(st)))
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}
