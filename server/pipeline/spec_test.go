package pipeline

import (
	"context"
	"maps"
	"net/http/httptest"
	"reflect"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"renga.dev/renga/gen/api"

	"renga.dev/renga/server/domain"
)

// loadSpec loads a small spec with the deployment's security schemes; paths is the YAML of its
// paths object, indented by two spaces.
func loadSpec(t *testing.T, paths string) *openapi3.T {
	t.Helper()
	doc := `openapi: 3.0.3
info: {title: test, version: "1"}
paths:
` + paths + `
components:
  securitySchemes:
    operatorToken: {type: http, scheme: bearer}
    userKey: {type: http, scheme: bearer}
    intakeKey: {type: http, scheme: bearer}
    installationSignature: {type: apiKey, in: header, name: Renga-Signature}
`
	spec, err := openapi3.NewLoader().LoadFromData([]byte(doc))
	if err != nil {
		t.Fatalf("load spec: %v\n%s", err, doc)
	}
	return spec
}

// oneOperation reads the one operation of a spec.
func oneOperation(t *testing.T, paths string) *Operation {
	t.Helper()
	ops, err := Operations(loadSpec(t, paths))
	if err != nil {
		t.Fatalf("Operations: %v", err)
	}
	if len(ops) != 1 {
		t.Fatalf("%d operations, want 1", len(ops))
	}
	for _, o := range ops {
		return o
	}
	return nil
}

const idempotencyKeyParam = `{name: Idempotency-Key, in: header, required: true, schema: {type: string}}`

func TestOperationsRefused(t *testing.T) {
	tests := []struct {
		name    string
		paths   string
		wantErr string
	}{
		{name: "operator write without Idempotency-Key", wantErr: "a write must declare the Idempotency-Key header", paths: `
  /api/v1/operator/things:
    post:
      operationId: createThing
      security: [{operatorToken: []}]
      x-renga-scope: organizations:write
      responses: {"201": {description: ok}}`},
		{name: "audited read on a write", wantErr: "x-renga-audited-read is for reads", paths: `
  /api/v1/operator/things:
    post:
      operationId: createThing
      security: [{operatorToken: []}]
      x-renga-scope: organizations:write
      x-renga-audited-read: true
      parameters: [` + idempotencyKeyParam + `]
      responses: {"201": {description: ok}}`},
		{name: "owner write without Idempotency-Key", wantErr: "a write must declare the Idempotency-Key header", paths: `
  /api/v1/org/things/{thing_id}:
    delete:
      operationId: deleteThing
      security: [{userKey: []}]
      x-renga-scope: owner
      parameters: [{name: thing_id, in: path, required: true, schema: {type: string}}]
      responses: {"204": {description: ok}}`},
		{name: "GET marked as a mutation without Idempotency-Key", wantErr: "a write must declare the Idempotency-Key header", paths: `
  /api/v1/operator/things:
    get:
      operationId: takeThings
      security: [{operatorToken: []}]
      x-renga-scope: organizations:read
      x-renga-mutation: true
      responses: {"200": {description: ok}}`},
		{name: "unknown operator scope", wantErr: `x-renga-scope "things:read" is not a known operator scope`, paths: `
  /api/v1/operator/things:
    get:
      operationId: listThings
      security: [{operatorToken: []}]
      x-renga-scope: things:read
      responses: {"200": {description: ok}}`},
		{name: "operator operation without scope", wantErr: `x-renga-scope "" is not a known operator scope`, paths: `
  /api/v1/operator/things:
    get:
      operationId: listThings
      security: [{operatorToken: []}]
      responses: {"200": {description: ok}}`},
		{name: "owner operation with an operator scope", wantErr: `x-renga-scope of an owner operation must be "owner"`, paths: `
  /api/v1/org/things:
    get:
      operationId: listThings
      security: [{userKey: []}]
      x-renga-scope: organizations:read
      responses: {"200": {description: ok}}`},
		{name: "agent operation with the owner scope", wantErr: `x-renga-scope of an agent operation must be "agent"`, paths: `
  /api/v1/agent/things:
    get:
      operationId: listThings
      security: [{installationSignature: []}]
      x-renga-scope: owner
      responses: {"200": {description: ok}}`},
		{name: "public operation with the agent scope", wantErr: `x-renga-scope of an unauthenticated operation must be "public"`, paths: `
  /api/v1/public/things:
    get:
      operationId: listThings
      security: []
      x-renga-scope: agent
      responses: {"200": {description: ok}}`},
		{name: "operator operation outside /api/v1/operator/", wantErr: "operator operations live under /api/v1/operator/", paths: `
  /api/v1/org/things:
    get:
      operationId: listThings
      security: [{operatorToken: []}]
      x-renga-scope: organizations:read
      responses: {"200": {description: ok}}`},
		{name: "operator operation at the prefix without its slash", wantErr: "operator operations live under /api/v1/operator/", paths: `
  /api/v1/operatorthings:
    get:
      operationId: listThings
      security: [{operatorToken: []}]
      x-renga-scope: organizations:read
      responses: {"200": {description: ok}}`},
		{name: "owner operation outside /api/v1/org/", wantErr: "user operations live under /api/v1/org/", paths: `
  /api/v1/operator/things:
    get:
      operationId: listThings
      security: [{userKey: []}]
      x-renga-scope: owner
      responses: {"200": {description: ok}}`},
		{name: "agent operation outside /api/v1/agent/", wantErr: "installation operations live under /api/v1/agent/", paths: `
  /api/v1/things:
    get:
      operationId: listThings
      security: [{installationSignature: []}]
      x-renga-scope: agent
      responses: {"200": {description: ok}}`},
		{name: "public operation under /api/v1/operator/", wantErr: "only operator operations live under /api/v1/operator/", paths: `
  /api/v1/operator/status:
    get:
      operationId: status
      security: []
      x-renga-scope: public
      responses: {"200": {description: ok}}`},
		{name: "public operation under /api/v1/org/", wantErr: "only user operations live under /api/v1/org/", paths: `
  /api/v1/org/status:
    get:
      operationId: status
      x-renga-scope: public
      responses: {"200": {description: ok}}`},
		{name: "no operationId", wantErr: "no operationId", paths: `
  /api/v1/operator/things:
    get:
      security: [{operatorToken: []}]
      x-renga-scope: organizations:read
      responses: {"200": {description: ok}}`},
		{name: "two security schemes", wantErr: "security must be one of", paths: `
  /api/v1/operator/things:
    get:
      operationId: listThings
      security: [{operatorToken: []}, {userKey: []}]
      x-renga-scope: organizations:read
      responses: {"200": {description: ok}}`},
		{name: "unknown security scheme", wantErr: "security must be one of", paths: `
  /api/v1/operator/things:
    get:
      operationId: listThings
      security: [{basic: []}]
      x-renga-scope: organizations:read
      responses: {"200": {description: ok}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops, err := Operations(loadSpec(t, tt.paths))
			if err == nil {
				t.Fatalf("Operations = %v, want an error", ops)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error = %q, want it to contain %q", err, tt.wantErr)
			}
			if len(ops) != 0 {
				t.Errorf("%d operations read, want none", len(ops))
			}
		})
	}
}

func TestOperationsErrorsJoined(t *testing.T) {
	ops, err := Operations(loadSpec(t, `
  /api/v1/operator/things:
    get:
      operationId: listThings
      security: [{operatorToken: []}]
      x-renga-scope: organizations:read
      responses: {"200": {description: ok}}
    post:
      operationId: createThing
      security: [{operatorToken: []}]
      x-renga-scope: organizations:write
      responses: {"201": {description: ok}}
    delete:
      operationId: deleteThings
      security: [{operatorToken: []}]
      x-renga-scope: nope
      responses: {"204": {description: ok}}`))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"POST /api/v1/operator/things: a write must declare", `DELETE /api/v1/operator/things: x-renga-scope "nope"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if len(ops) != 1 || ops["GET /api/v1/operator/things"] == nil {
		t.Errorf("operations = %v, want only the valid GET", ops)
	}
}

func TestReadOperation(t *testing.T) {
	tests := []struct {
		name  string
		paths string
		want  Operation // compared on its exported fields and pathParams
	}{
		{name: "operator read", paths: `
  /api/v1/operator/organizations/{organization_id}:
    get:
      operationId: GetOrganization
      security: [{operatorToken: []}]
      x-renga-scope: organizations:read
      parameters: [{name: organization_id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}`,
			want: Operation{ID: "getOrganization", Method: "GET", Route: "/api/v1/operator/organizations/{organization_id}",
				Scope: "organizations:read", Auth: AuthOperator, pathParams: []string{"organization_id"}}},
		{name: "operator write with key and If-Match", paths: `
  /api/v1/operator/organizations/{organization_id}/members/{user_id}:
    patch:
      operationId: updateMember
      security: [{operatorToken: []}]
      x-renga-scope: organizations:write
      parameters:
        - {name: user_id, in: path, required: true, schema: {type: string}}
        - {name: organization_id, in: path, required: true, schema: {type: string}}
        - ` + idempotencyKeyParam + `
        - {name: If-Match, in: header, required: true, schema: {type: string}}
      responses: {"200": {description: ok}}`,
			want: Operation{ID: "updateMember", Method: "PATCH", Route: "/api/v1/operator/organizations/{organization_id}/members/{user_id}",
				Scope: "organizations:write", Auth: AuthOperator, Mutation: true, KeyRequired: true, KeyAccepted: true, IfMatch: true,
				pathParams: []string{"organization_id", "user_id"}}},
		{name: "optional key, lower-case header names", paths: `
  /api/v1/operator/things:
    put:
      operationId: putThings
      security: [{operatorToken: []}]
      x-renga-scope: authenticated
      parameters:
        - {name: idempotency-key, in: header, schema: {type: string}}
        - {name: if-match, in: header, schema: {type: string}}
      responses: {"200": {description: ok}}`,
			want: Operation{ID: "putThings", Method: "PUT", Route: "/api/v1/operator/things",
				Scope: "authenticated", Auth: AuthOperator, Mutation: true, KeyAccepted: true, IfMatch: true}},
		{name: "key declared on the path item", paths: `
  /api/v1/operator/things:
    parameters:
      - ` + idempotencyKeyParam + `
    post:
      operationId: createThing
      security: [{operatorToken: []}]
      x-renga-scope: organizations:write
      responses: {"201": {description: ok}}`,
			want: Operation{ID: "createThing", Method: "POST", Route: "/api/v1/operator/things",
				Scope: "organizations:write", Auth: AuthOperator, Mutation: true, KeyRequired: true, KeyAccepted: true}},
		{name: "a query parameter named Idempotency-Key is not the header", paths: `
  /api/v1/operator/things:
    get:
      operationId: listThings
      security: [{operatorToken: []}]
      x-renga-scope: organizations:read
      parameters: [{name: Idempotency-Key, in: query, schema: {type: string}}]
      responses: {"200": {description: ok}}`,
			want: Operation{ID: "listThings", Method: "GET", Route: "/api/v1/operator/things",
				Scope: "organizations:read", Auth: AuthOperator}},
		{name: "an octet-stream body is streamed", paths: `
  /api/v1/operator/things/{thing_id}/imports:
    post:
      operationId: importThing
      security: [{operatorToken: []}]
      x-renga-scope: transfers:write
      parameters: [{name: thing_id, in: path, required: true, schema: {type: string}}, ` + idempotencyKeyParam + `]
      requestBody: {required: true, content: {application/octet-stream: {schema: {type: string, format: binary}}}}
      responses: {"201": {description: ok}}`,
			want: Operation{ID: "importThing", Method: "POST", Route: "/api/v1/operator/things/{thing_id}/imports",
				Scope: "transfers:write", Auth: AuthOperator, Mutation: true, KeyRequired: true, KeyAccepted: true,
				StreamedBody: true, pathParams: []string{"thing_id"}}},
		{name: "an audited read", paths: `
  /api/v1/operator/things/{thing_id}/archive:
    get:
      operationId: getThingArchive
      security: [{operatorToken: []}]
      x-renga-scope: transfers:write
      x-renga-audited-read: true
      parameters: [{name: thing_id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok, content: {application/octet-stream: {schema: {type: string, format: binary}}}}}`,
			want: Operation{ID: "getThingArchive", Method: "GET", Route: "/api/v1/operator/things/{thing_id}/archive",
				Scope: "transfers:write", Auth: AuthOperator, AuditedRead: true, StreamedResponse: true, pathParams: []string{"thing_id"}}},
		{name: "a body that may also be JSON is read whole", paths: `
  /api/v1/operator/things:
    post:
      operationId: createThing
      security: [{operatorToken: []}]
      x-renga-scope: transfers:write
      parameters: [` + idempotencyKeyParam + `]
      requestBody: {required: true, content: {application/octet-stream: {schema: {type: string, format: binary}}, application/json: {schema: {type: object}}}}
      responses: {"201": {description: ok}}`,
			want: Operation{ID: "createThing", Method: "POST", Route: "/api/v1/operator/things",
				Scope: "transfers:write", Auth: AuthOperator, Mutation: true, KeyRequired: true, KeyAccepted: true}},
		{name: "extensions", paths: `
  /api/v1/operator/tokens:
    post:
      operationId: rotateToken
      security: [{operatorToken: []}]
      x-renga-scope: authenticated
      x-renga-changes-own-credential: true
      x-renga-secret-fields: [secret, recovery_code]
      parameters: [` + idempotencyKeyParam + `]
      responses: {"201": {description: ok}}`,
			want: Operation{ID: "rotateToken", Method: "POST", Route: "/api/v1/operator/tokens",
				Scope: "authenticated", Auth: AuthOperator, Mutation: true, KeyRequired: true, KeyAccepted: true,
				ChangesOwnCredential: true, SecretFields: []string{"secret", "recovery_code"}}},
		{name: "extensions set false", paths: `
  /api/v1/operator/things:
    get:
      operationId: listThings
      security: [{operatorToken: []}]
      x-renga-scope: organizations:read
      x-renga-mutation: false
      x-renga-changes-own-credential: false
      x-renga-secret-fields: []
      responses: {"200": {description: ok}}`,
			want: Operation{ID: "listThings", Method: "GET", Route: "/api/v1/operator/things",
				Scope: "organizations:read", Auth: AuthOperator}},
		{name: "extensions of the wrong type ignored", paths: `
  /api/v1/operator/things:
    get:
      operationId: listThings
      security: [{operatorToken: []}]
      x-renga-scope: organizations:read
      x-renga-mutation: "true"
      x-renga-changes-own-credential: 1
      x-renga-secret-fields: [secret, 3]
      responses: {"200": {description: ok}}`,
			want: Operation{ID: "listThings", Method: "GET", Route: "/api/v1/operator/things",
				Scope: "organizations:read", Auth: AuthOperator, SecretFields: []string{"secret"}}},
		{name: "agent GET that is a mutation", paths: `
  /api/v1/agent/jobs:
    get:
      operationId: fetchJobs
      security: [{installationSignature: []}]
      x-renga-scope: agent
      x-renga-mutation: true
      responses: {"200": {description: ok}}`,
			want: Operation{ID: "fetchJobs", Method: "GET", Route: "/api/v1/agent/jobs",
				Scope: ScopeAgent, Auth: AuthInstallation, Mutation: true}},
		{name: "agent write needs no key", paths: `
  /api/v1/agent/installations/{installation_id}:
    put:
      operationId: registerInstallation
      security: [{intakeKey: []}]
      x-renga-scope: agent
      parameters: [{name: installation_id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}`,
			want: Operation{ID: "registerInstallation", Method: "PUT", Route: "/api/v1/agent/installations/{installation_id}",
				Scope: ScopeAgent, Auth: AuthIntake, Mutation: true, pathParams: []string{"installation_id"}}},
		{name: "owner write", paths: `
  /api/v1/org/settings:
    patch:
      operationId: updateSettings
      security: [{userKey: []}]
      x-renga-scope: owner
      parameters: [` + idempotencyKeyParam + `]
      responses: {"200": {description: ok}}`,
			want: Operation{ID: "updateSettings", Method: "PATCH", Route: "/api/v1/org/settings",
				Scope: ScopeOwner, Auth: AuthUser, Mutation: true, KeyRequired: true, KeyAccepted: true}},
		{name: "public write needs no key", paths: `
  /api/v1/invitations/{invitation_id}/accept:
    post:
      operationId: acceptInvitation
      security: []
      x-renga-scope: public
      parameters: [{name: invitation_id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}`,
			want: Operation{ID: "acceptInvitation", Method: "POST", Route: "/api/v1/invitations/{invitation_id}/accept",
				Scope: ScopePublic, Auth: AuthPublic, Mutation: true, pathParams: []string{"invitation_id"}}},
		{name: "no security at all is public", paths: `
  /api/v1/health:
    get:
      operationId: health
      x-renga-scope: public
      responses: {"200": {description: ok}}`,
			want: Operation{ID: "health", Method: "GET", Route: "/api/v1/health", Scope: ScopePublic, Auth: AuthPublic}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := oneOperation(t, tt.paths)
			if got.spec == nil || got.validation == nil {
				t.Fatal("spec or validation route not set")
			}
			if got.Spec() != got.spec {
				t.Error("Spec() is not the operation read")
			}
			cmp := *got
			cmp.spec, cmp.validation, cmp.pathOnly = nil, nil, false // pathOnly: TestPathOnlyAgreesWithTheValidator
			cmp.singleQuery = nil                                    // TestSingleQuery
			if !reflect.DeepEqual(cmp, tt.want) {
				t.Errorf("operation =\n%+v\nwant\n%+v", cmp, tt.want)
			}
		})
	}
}

func TestOperationsKeyedByPattern(t *testing.T) {
	ops, err := Operations(loadSpec(t, `
  /api/v1/operator/things:
    get:
      operationId: listThings
      security: [{operatorToken: []}]
      x-renga-scope: organizations:read
      responses: {"200": {description: ok}}
    post:
      operationId: createThing
      security: [{operatorToken: []}]
      x-renga-scope: organizations:write
      parameters: [`+idempotencyKeyParam+`]
      responses: {"201": {description: ok}}
  /api/v1/operator/things/{thing_id}:
    get:
      operationId: getThing
      security: [{operatorToken: []}]
      x-renga-scope: organizations:read
      parameters: [{name: thing_id, in: path, required: true, schema: {type: string}}]
      responses: {"200": {description: ok}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"GET /api/v1/operator/things": "listThings", "POST /api/v1/operator/things": "createThing",
		"GET /api/v1/operator/things/{thing_id}": "getThing"}
	got := map[string]string{}
	for k, o := range ops {
		got[k] = o.ID
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("operations = %v, want %v", got, want)
	}
}

func TestSpecGlobalSecurity(t *testing.T) {
	spec := loadSpec(t, `
  /api/v1/operator/things:
    get:
      operationId: listThings
      x-renga-scope: organizations:read
      responses: {"200": {description: ok}}
  /api/v1/health:
    get:
      operationId: health
      security: []
      x-renga-scope: public
      responses: {"200": {description: ok}}`)
	spec.Security = openapi3.SecurityRequirements{{"operatorToken": []string{}}}
	ops, err := Operations(spec)
	if err != nil {
		t.Fatal(err)
	}
	if got := ops["GET /api/v1/operator/things"].Auth; got != AuthOperator {
		t.Errorf("inherited security: auth %q, want %q", got, AuthOperator)
	}
	if got := ops["GET /api/v1/health"].Auth; got != AuthPublic {
		t.Errorf("security [] overriding the global one: auth %q, want %q", got, AuthPublic)
	}
}

func TestValidationCopyLeavesOutPipelineHeaders(t *testing.T) {
	o := oneOperation(t, `
  /api/v1/operator/things/{thing_id}:
    parameters:
      - {name: thing_id, in: path, required: true, schema: {type: string}}
      - {name: if-match, in: header, required: true, schema: {type: string}}
      - {name: X-Path-Level, in: header, schema: {type: string}}
    put:
      operationId: putThing
      security: [{operatorToken: []}]
      x-renga-scope: organizations:write
      parameters:
        - `+idempotencyKeyParam+`
        - {name: X-Trace, in: header, required: true, schema: {type: string}}
        - {name: dry_run, in: query, schema: {type: boolean}}
        - {name: If-Match, in: query, schema: {type: string}}
      responses: {"200": {description: ok}}`)
	names := func(ps openapi3.Parameters) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Value.In+":"+p.Value.Name)
		}
		return out
	}
	// A query parameter named like a pipeline header is the handler's, and stays.
	if got, want := names(o.validation.Operation.Parameters), []string{"header:X-Trace", "query:dry_run", "query:If-Match"}; !reflect.DeepEqual(got, want) {
		t.Errorf("validation operation parameters = %v, want %v", got, want)
	}
	if got, want := names(o.validation.PathItem.Parameters), []string{"path:thing_id", "header:X-Path-Level"}; !reflect.DeepEqual(got, want) {
		t.Errorf("validation path item parameters = %v, want %v", got, want)
	}
	// The spec itself is left whole.
	if got := len(o.spec.Parameters); got != 4 {
		t.Errorf("the spec's operation has %d parameters, want 4", got)
	}
	if o.validation.Operation == o.spec {
		t.Error("the validation operation is the spec's")
	}
	if !o.IfMatch || !o.KeyRequired {
		t.Errorf("IfMatch %v, KeyRequired %v: want both (path item and operation parameters read)", o.IfMatch, o.KeyRequired)
	}
	if o.validation.Path != o.Route || o.validation.Method != "PUT" {
		t.Errorf("validation route %s %s", o.validation.Method, o.validation.Path)
	}
}

func TestAuthFirst(t *testing.T) {
	tests := []struct{ path, want string }{
		{"/api/v1/operator/organizations", AuthOperator},
		{"/api/v1/operator/", AuthOperator},
		{"/api/v1/operator", ""},
		{"/api/v1/org/settings", AuthUser},
		{"/api/v1/organizations", ""},
		{"/api/v1/agent/jobs", ""},
		{"/api/v1/health", ""},
		{"/", ""},
	}
	for _, tt := range tests {
		if got := authFirst(tt.path); got != tt.want {
			t.Errorf("authFirst(%q) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestLowerFirst(t *testing.T) {
	tests := []struct{ in, want string }{{"", ""}, {"A", "a"}, {"GetThing", "getThing"}, {"getThing", "getThing"}, {"URLs", "uRLs"}}
	for _, tt := range tests {
		if got := lowerFirst(tt.in); got != tt.want {
			t.Errorf("lowerFirst(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestActorHasScope(t *testing.T) {
	var (
		token    = Actor{Type: domain.ActorOperatorToken, Scopes: []string{"organizations:write", "audit:read"}}
		noScopes = Actor{Type: domain.ActorOperatorToken}
		local    = Actor{Type: domain.ActorLocalOperator}
		owner    = Actor{Type: domain.ActorUser, Role: "owner"}
		member   = Actor{Type: domain.ActorUser, Role: "member"}
		// A member with operator scopes (never made by authentication) still gets none of them.
		scopedMember = Actor{Type: domain.ActorUser, Role: "owner", Scopes: domain.Scopes}
		intake       = Actor{Type: domain.ActorIntakeKey}
		installation = Actor{Type: domain.ActorInstallation, Scopes: domain.Scopes}
		anonymous    = Actor{}
	)
	tests := []struct {
		name  string
		actor Actor
		scope string
		want  bool
	}{
		{"public: anonymous", anonymous, ScopePublic, true},
		{"public: token", token, ScopePublic, true},
		{"public: local", local, ScopePublic, true},
		{"public: member", member, ScopePublic, true},
		{"public: installation", installation, ScopePublic, true},

		{"owner: owner", owner, ScopeOwner, true},
		{"owner: member", member, ScopeOwner, false},
		{"owner: user without role", Actor{Type: domain.ActorUser}, ScopeOwner, false},
		{"owner: token", token, ScopeOwner, false},
		{"owner: token with owner role", Actor{Type: domain.ActorOperatorToken, Role: "owner"}, ScopeOwner, false},
		{"owner: local", local, ScopeOwner, false},
		{"owner: intake key", intake, ScopeOwner, false},
		{"owner: anonymous", anonymous, ScopeOwner, false},

		{"agent: intake key", intake, ScopeAgent, true},
		{"agent: installation", installation, ScopeAgent, true},
		{"agent: owner", owner, ScopeAgent, false},
		{"agent: token", token, ScopeAgent, false},
		{"agent: local", local, ScopeAgent, false},
		{"agent: anonymous", anonymous, ScopeAgent, false},

		{"authenticated: token without scopes", noScopes, domain.ScopeAuthenticated, true},
		{"authenticated: local", local, domain.ScopeAuthenticated, true},
		{"authenticated: owner", owner, domain.ScopeAuthenticated, false},
		{"authenticated: intake key", intake, domain.ScopeAuthenticated, false},
		{"authenticated: installation", installation, domain.ScopeAuthenticated, false},

		{"operator scope: token granted it", token, "organizations:write", true},
		{"operator scope: token granted the write scope, read", token, "organizations:read", true},
		{"operator scope: token granted the read scope, write", Actor{Type: domain.ActorOperatorToken, Scopes: []string{"audit:read", "policies:read"}}, "policies:write", false},
		{"operator scope: token not granted it", token, "policies:read", false},
		{"operator scope: token without scopes", noScopes, "deployment:read", false},
		{"operator scope: local holds every scope", local, "transfers:write", true},
		{"operator scope: local, read", local, "audit:read", true},
		{"operator scope: owner", owner, "organizations:read", false},
		{"operator scope: user given scopes", scopedMember, "organizations:read", false},
		{"operator scope: intake key", intake, "organizations:read", false},
		{"operator scope: installation given scopes", installation, "organizations:read", false},
		{"operator scope: anonymous", anonymous, "organizations:read", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.actor.HasScope(tt.scope); got != tt.want {
				t.Errorf("%+v HasScope(%q) = %v, want %v", tt.actor, tt.scope, got, tt.want)
			}
		})
	}
}

// TestPathOnlyAgreesWithTheValidator: for every operation whose validation the pipeline skips
// when its path parameters match their patterns (pathOnly), the validator itself accepts such a
// request (with a query parameter the operation does not declare, too) and refuses one whose
// parameter does not match. Fails when pathOnly takes an operation with another constraint (a
// query parameter, a body, a maxLength, a format).
func TestPathOnlyAgreesWithTheValidator(t *testing.T) {
	ops := pathOnlyOperations(t)
	var fast []string
	for _, op := range ops {
		fast = append(fast, op.ID)
		for _, query := range []string{"", "?unknown=1"} {
			params := map[string]string{}
			for name, re := range op.pathPatterns {
				params[name] = matching(t, re.String())
				if !re.MatchString(params[name]) {
					t.Fatalf("%s: generated %q does not match %s", op.ID, params[name], re)
				}
			}
			if err := validateWithKin(op, params, query); err != nil {
				t.Errorf("%s%s: well-formed parameters %v refused by the validator: %v", op.ID, query, params, err)
			}
			for name := range params {
				bad := maps.Clone(params)
				bad[name] = "x"
				if op.wellFormed(bad) {
					t.Fatalf("%s: %q matches %s", op.ID, "x", op.pathPatterns[name])
				}
				if validateWithKin(op, bad, query) == nil {
					t.Errorf("%s: malformed %s accepted by the validator", op.ID, name)
				}
			}
		}
	}
	t.Logf("pathOnly: %d operations: %v", len(fast), fast)
	for _, id := range []string{"getOrganization", "getPolicy", "getTransfer"} {
		if !slices.Contains(fast, id) {
			t.Errorf("%s is not pathOnly (pathOnly: %v)", id, fast)
		}
	}
	for _, id := range []string{"listOrganizations", "createOrganization", "listObservations", "getHome"} {
		if slices.Contains(fast, id) {
			t.Errorf("%s has inputs besides its path and is pathOnly", id)
		}
	}
}

// specOperations are the operations of the spec, as the pipeline reads them, by ID.
func specOperations(t testing.TB) map[string]*Operation {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	spec.Servers = nil
	ops, err := Operations(spec)
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func pathOnlyOperations(t testing.TB) []*Operation {
	var out []*Operation
	for _, op := range specOperations(t) {
		if op.pathOnly {
			out = append(out, op)
		}
	}
	return out
}

func validateWithKin(op *Operation, params map[string]string, query string) error {
	path := op.Route
	for name, v := range params {
		path = strings.ReplaceAll(path, "{"+name+"}", v)
	}
	r := httptest.NewRequest(op.Method, path+query, nil)
	return openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: op.validation,
		Options: &openapi3filter.Options{MultiError: true}, // no AuthenticationFunc: the pipeline's routes ask the validator to check no security requirement
	})
}

// matching is a string pattern matches, generated from its syntax tree (literals, classes,
// repetitions, concatenations and anchors: what the spec's ID patterns use).
func matching(t testing.TB, pattern string) string {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	var gen func(*syntax.Regexp)
	gen = func(re *syntax.Regexp) {
		switch re.Op {
		case syntax.OpLiteral:
			b.WriteString(string(re.Rune))
		case syntax.OpCharClass:
			b.WriteRune(re.Rune[0])
		case syntax.OpConcat, syntax.OpCapture:
			for _, s := range re.Sub {
				gen(s)
			}
		case syntax.OpRepeat, syntax.OpPlus:
			for range max(re.Min, 1) {
				gen(re.Sub[0])
			}
		case syntax.OpAlternate:
			gen(re.Sub[0])
		case syntax.OpBeginText, syntax.OpEndText, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpStar, syntax.OpQuest, syntax.OpEmptyMatch:
		default:
			t.Fatalf("pattern %s: no generator for %v", pattern, re.Op)
		}
	}
	gen(re.Simplify())
	return b.String()
}

// TestSingleQuery: the query parameters that take one value are every query parameter but an
// array, the path item's included; a path or header parameter is none.
func TestSingleQuery(t *testing.T) {
	op := oneOperation(t, `
  /api/v1/operator/things/{thing_id}:
    parameters: [{name: shared, in: query, schema: {type: integer}}]
    get:
      operationId: getThing
      security: [{operatorToken: []}]
      x-renga-scope: organizations:read
      parameters:
        - {name: thing_id, in: path, required: true, schema: {type: string}}
        - {name: one, in: query, schema: {type: string}}
        - {name: many, in: query, schema: {type: array, items: {type: string}}}
        - {name: untyped, in: query}
        - {name: X-Thing, in: header, schema: {type: string}}
      responses: {"200": {description: ok}}`)
	got := slices.Sorted(slices.Values(op.singleQuery))
	if want := []string{"one", "shared", "untyped"}; !slices.Equal(got, want) {
		t.Errorf("singleQuery = %v, want %v", got, want)
	}
}
