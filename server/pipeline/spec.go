package pipeline

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"

	"renga.dev/renga/server/domain"
)

// Operation is what the pipeline knows of one operation of the spec, read once at start-up
// from openapi.yaml and its x-renga extensions.
type Operation struct {
	ID          string
	Method      string
	Route       string // the path template, e.g. /api/v1/operator/organizations/{organization_id}
	Scope       string // x-renga-scope
	Auth        string // the credential path (AuthOperator, ...), from the operation's security
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
	// SingleStatement (x-renga-single-statement): an installation's write that its domain
	// function makes in one statement; the pipeline opens no transaction around it.
	SingleStatement bool
	// OneRoundTrip (x-renga-one-round-trip): an operator's write whose handler reads nothing and
	// defers its statements (State.Defer), TxNow included (a create): the handler runs first,
	// then the token's and the key's checks (domain.QueueWriteChecks), its statements, the stored
	// result and the audit event go in one round trip, one implicit transaction. A check that
	// refuses sends the write again the two-round-trip way, which answers what it refused.
	OneRoundTrip bool
	// StreamedBody: the operation's only request media type is application/octet-stream (an
	// archive), so its body is not read into memory, held to MaxBodyBytes or validated here: the
	// handler reads it as a stream from the request.
	StreamedBody bool
	// StreamedResponse: the operation answers success with application/octet-stream (an
	// archive), written as it is read.
	StreamedResponse bool
	// AuditedRead (x-renga-audited-read): a GET that spends something (a single-use download
	// capability) without taking the write path (its response streams): its attempt is
	// audited as a write's is, once its status is known and before its body.
	AuditedRead bool

	spec       *openapi3.Operation
	pathParams []string // the names in Route, in order
	// pathPatterns are the patterns the spec gives path parameters, by name: a read sent to
	// the database before validation (a Prefetch) only with values that match them.
	pathPatterns map[string]*regexp.Regexp
	validation   *routers.Route // what the validator checks: the operation without the headers the pipeline checks itself
	// pathOnly: all the validator would check of a request without a query string is its path
	// parameters, each a string whose only constraint is its pattern (pathPatterns), which the
	// pipeline matches itself (wellFormed): such a request has nothing left to validate.
	pathOnly bool
	direct   bool // answered by a handler of Options.Direct (no statement, no deadline)
	// singleQuery names the query parameters that take one value (any but an array): the
	// validator checks the first of several, the generated handler refuses several.
	singleQuery []string
}

// Credential paths, from an operation's security requirement.
const (
	AuthOperator     = "operator"     // operatorToken: /api/v1/operator
	AuthUser         = "user"         // userKey: /api/v1/org
	AuthIntake       = "intake"       // intakeKey: agent registration
	AuthInstallation = "installation" // installationSignature: the other agent requests
	AuthPublic       = "public"       // none: rate-limited per source address
)

// Scopes of the credential paths other than the operator's (whose scopes are domain.Scopes).
const (
	ScopeOwner  = "owner"
	ScopeAgent  = "agent"
	ScopePublic = "public"
)

// apiPrefix is where each credential path's operations live. Under the operator and owner
// prefixes, a request is authenticated before anything about its route is revealed.
var apiPrefix = map[string]string{AuthOperator: "/api/v1/operator/", AuthUser: "/api/v1/org/",
	AuthIntake: "/api/v1/agent/", AuthInstallation: "/api/v1/agent/"}

// authFirst reports the credential path a request's path demands before routing, or "".
func authFirst(path string) string {
	for _, a := range []string{AuthOperator, AuthUser} {
		if strings.HasPrefix(path, apiPrefix[a]) {
			return a
		}
	}
	return ""
}

// headersThePipelineChecks are header parameters the pipeline reads and checks itself (with its
// own codes: 400 idempotency_key_required, 428, 412), so request validation leaves them out.
var headersThePipelineChecks = []string{"Idempotency-Key", "If-Match"}

var pathParamPattern = regexp.MustCompile(`\{([^}]+)\}`)

// Operations reads the operations of the spec and checks each declares what the pipeline
// needs: an operationId, a known scope for its credential path, a path under that credential
// path's prefix, and an Idempotency-Key parameter on every authenticated write. It returns them
// keyed by ServeMux pattern ("GET /api/v1/...").
func Operations(spec *openapi3.T) (map[string]*Operation, error) {
	ops := map[string]*Operation{}
	var errs []error
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			o, err := readOperation(spec, path, item, method, op)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %s: %w", method, path, err))
				continue
			}
			ops[method+" "+path] = o
		}
	}
	return ops, errors.Join(errs...)
}

func readOperation(spec *openapi3.T, path string, item *openapi3.PathItem, method string, op *openapi3.Operation) (*Operation, error) {
	// The generated package embeds the spec with operationIds capitalized; audit records them as
	// openapi.yaml spells them (lowerCamelCase).
	o := &Operation{ID: lowerFirst(op.OperationID), Method: method, Route: path, spec: op,
		Mutation: method != http.MethodGet && method != http.MethodHead}
	if o.ID == "" {
		return nil, errors.New("no operationId")
	}
	readExtensions(o, op)
	o.StreamedBody = streamedBody(op)
	o.StreamedResponse = streamedResponse(op)
	var err error
	if o.Auth, err = credentialPath(spec, op); err != nil {
		return nil, err
	}
	if err := checkScope(o.Auth, o.Scope); err != nil {
		return nil, err
	}
	if prefix := apiPrefix[o.Auth]; prefix != "" && !strings.HasPrefix(path, prefix) {
		return nil, fmt.Errorf("%s operations live under %s", o.Auth, prefix)
	}
	if first := authFirst(path); first != "" && first != o.Auth {
		return nil, fmt.Errorf("only %s operations live under %s", first, apiPrefix[first])
	}
	if err := readParameters(o, append(slices.Clone(item.Parameters), op.Parameters...)); err != nil {
		return nil, err
	}
	if err := checkExtensions(o); err != nil {
		return nil, err
	}
	o.validation = &routers.Route{Spec: spec, Path: path, Method: method,
		PathItem: withoutPipelineHeaders(item), Operation: withoutPipelineHeaders(op)}
	o.pathOnly = o.spec.RequestBody == nil && onlyPathPatterns(o)
	return o, nil
}

// readExtensions reads the operation's x-renga extensions.
func readExtensions(o *Operation, op *openapi3.Operation) {
	// A GET that changes state (an agent fetching its jobs marks them delivered) says so, and
	// takes the mutation path.
	if m, ok := op.Extensions["x-renga-mutation"].(bool); ok && m {
		o.Mutation = true
	}
	o.Scope, _ = op.Extensions["x-renga-scope"].(string)
	o.ChangesOwnCredential, _ = op.Extensions["x-renga-changes-own-credential"].(bool)
	o.SingleStatement, _ = op.Extensions["x-renga-single-statement"].(bool)
	o.OneRoundTrip, _ = op.Extensions["x-renga-one-round-trip"].(bool)
	o.AuditedRead, _ = op.Extensions["x-renga-audited-read"].(bool)
	if fields, ok := op.Extensions["x-renga-secret-fields"].([]any); ok {
		for _, f := range fields {
			if name, ok := f.(string); ok {
				o.SecretFields = append(o.SecretFields, name)
			}
		}
	}
}

// checkExtensions checks that the operation's extensions and headers fit its credential path.
func checkExtensions(o *Operation) error {
	// Only an installation's writes are neither audited nor keyed: nothing for the pipeline's
	// transaction to hold.
	if o.SingleStatement && (o.Auth != AuthInstallation || !o.Mutation) {
		return errors.New("x-renga-single-statement is for an installation's writes only")
	}
	if o.OneRoundTrip && (o.Auth != AuthOperator || !o.Mutation || o.StreamedBody) {
		return errors.New("x-renga-one-round-trip is for operators' writes whose body is JSON")
	}
	if o.AuditedRead && o.Mutation {
		return errors.New("x-renga-audited-read is for reads (a write is audited anyway)")
	}
	// Agents' writes are idempotent by their own IDs (installation, batch, job).
	if o.Mutation && (o.Auth == AuthOperator || o.Auth == AuthUser) && !o.KeyAccepted {
		return errors.New("a write must declare the Idempotency-Key header")
	}
	return nil
}

// readParameters reads what the pipeline needs of the operation's parameters (its path item's
// and its own): the headers it checks itself, the path parameters and their patterns, and the
// query parameters that take one value.
func readParameters(o *Operation, params openapi3.Parameters) error {
	for _, m := range pathParamPattern.FindAllStringSubmatch(o.Route, -1) {
		o.pathParams = append(o.pathParams, m[1])
	}
	for _, ref := range params {
		p := ref.Value
		if p == nil {
			continue
		}
		switch p.In {
		case openapi3.ParameterInHeader:
			switch http.CanonicalHeaderKey(p.Name) {
			case "Idempotency-Key":
				o.KeyAccepted, o.KeyRequired = true, p.Required
			case "If-Match":
				o.IfMatch = true
			}
		case openapi3.ParameterInQuery:
			if p.Schema == nil || p.Schema.Value == nil || p.Schema.Value.Type == nil || !p.Schema.Value.Type.Is(openapi3.TypeArray) {
				o.singleQuery = append(o.singleQuery, p.Name)
			}
		case openapi3.ParameterInPath:
			if p.Schema == nil || p.Schema.Value == nil || p.Schema.Value.Pattern == "" {
				continue
			}
			re, err := regexp.Compile(p.Schema.Value.Pattern)
			if err != nil {
				return fmt.Errorf("path parameter %s: %w", p.Name, err)
			}
			if o.pathPatterns == nil {
				o.pathPatterns = map[string]*regexp.Regexp{}
			}
			o.pathPatterns[p.Name] = re
		}
	}
	return nil
}

// onlyPathPatterns reports whether what the validator checks of o's parameters is its path
// parameters alone, each `type: string` with a `pattern` and nothing else that constrains it.
func onlyPathPatterns(o *Operation) bool {
	for _, ref := range append(slices.Clone(o.validation.PathItem.Parameters), o.validation.Operation.Parameters...) {
		p := ref.Value
		if p == nil || p.In != openapi3.ParameterInPath || p.Content != nil || o.pathPatterns[p.Name] == nil ||
			p.Schema == nil || p.Schema.Value == nil {
			return false
		}
		c := *p.Schema.Value // what is left once the type and the pattern are set aside
		if c.Type == nil || !c.Type.Is(openapi3.TypeString) {
			return false
		}
		c.Type, c.Pattern, c.Description, c.Example, c.Title, c.Extensions = nil, "", "", nil, "", nil
		if !c.IsEmpty() {
			return false
		}
	}
	return true
}

// StreamedMediaType is the request media type whose body the handler reads as a stream.
const StreamedMediaType = "application/octet-stream"

// streamedBody reports whether an operation's request body is one stream of bytes: its only
// media type is StreamedMediaType. Any other body (JSON) is read whole and validated.
func streamedBody(op *openapi3.Operation) bool {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return false
	}
	c := op.RequestBody.Value.Content
	return len(c) == 1 && c[StreamedMediaType] != nil
}

// streamedResponse reports whether an operation's success is StreamedMediaType.
func streamedResponse(op *openapi3.Operation) bool {
	if op.Responses == nil {
		return false
	}
	for code, r := range op.Responses.Map() {
		if strings.HasPrefix(code, "2") && r.Value != nil && r.Value.Content[StreamedMediaType] != nil {
			return true
		}
	}
	return false
}

func credentialPath(spec *openapi3.T, op *openapi3.Operation) (string, error) {
	security := spec.Security
	if op.Security != nil {
		security = *op.Security
	}
	if len(security) == 0 {
		return AuthPublic, nil
	}
	// A signed agent request names its three headers as one requirement.
	if len(security) == 1 && len(security[0]) == 3 && security[0]["installationSignature"] != nil &&
		security[0]["installationId"] != nil && security[0]["installationTimestamp"] != nil {
		return AuthInstallation, nil
	}
	if len(security) == 1 && len(security[0]) == 1 {
		for scheme, path := range map[string]string{"operatorToken": AuthOperator, "userKey": AuthUser,
			"intakeKey": AuthIntake, "installationSignature": AuthInstallation} {
			if security[0][scheme] != nil {
				return path, nil
			}
		}
	}
	return "", errors.New("security must be one of operatorToken, userKey, intakeKey, installationSignature with installationId and installationTimestamp, or none")
}

func checkScope(auth, scope string) error {
	switch auth {
	case AuthOperator:
		if scope != domain.ScopeAuthenticated && !slices.Contains(domain.Scopes, scope) {
			return fmt.Errorf("x-renga-scope %q is not a known operator scope", scope)
		}
	case AuthUser:
		if scope != ScopeOwner {
			return fmt.Errorf("x-renga-scope of an owner operation must be %q", ScopeOwner)
		}
	case AuthIntake, AuthInstallation:
		if scope != ScopeAgent {
			return fmt.Errorf("x-renga-scope of an agent operation must be %q", ScopeAgent)
		}
	case AuthPublic:
		if scope != ScopePublic {
			return fmt.Errorf("x-renga-scope of an unauthenticated operation must be %q", ScopePublic)
		}
	}
	return nil
}

// withoutPipelineHeaders copies an operation or path item without the header parameters the
// pipeline checks itself.
func withoutPipelineHeaders[T openapi3.Operation | openapi3.PathItem](v *T) *T {
	c := *v
	params := func(ps openapi3.Parameters) openapi3.Parameters {
		out := openapi3.Parameters{}
		for _, p := range ps {
			if p.Value != nil && p.Value.In == openapi3.ParameterInHeader &&
				slices.Contains(headersThePipelineChecks, http.CanonicalHeaderKey(p.Value.Name)) {
				continue
			}
			out = append(out, p)
		}
		return out
	}
	switch x := any(&c).(type) {
	case *openapi3.Operation:
		x.Parameters = params(x.Parameters)
		// The pipeline authenticates every request itself (stage 2) before validation: the
		// validator's own check of the security requirements would only read the body again
		// for authentication functions that do nothing. No requirement: nothing to check.
		x.Security = &openapi3.SecurityRequirements{}
	case *openapi3.PathItem:
		x.Parameters = params(x.Parameters)
	}
	return &c
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToLower(s[:1]) + s[1:]
}

// Spec is the operation as openapi.yaml declares it.
func (o *Operation) Spec() *openapi3.Operation { return o.spec }

// wellFormed reports whether every path parameter with a pattern in the spec matches it.
func (o *Operation) wellFormed(params map[string]string) bool {
	for name, re := range o.pathPatterns {
		if !re.MatchString(params[name]) {
			return false
		}
	}
	return true
}
