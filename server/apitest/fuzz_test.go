package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/pipeline"
	"renga.dev/renga/server/servertest"
)

// TestSpecFuzz sends every operation of openapi.yaml requests generated from its schemas, valid
// ones and ones with one constraint broken, with the right credential, and holds every answer
// to the spec: no 5xx; the status declared by the operation itself (not only by `default`);
// the headers and body valid under kin-openapi's response validation (so a problem carries a
// code of the ErrorCode enum). `make test` runs a short, seeded round; `make fuzz` a long one
// (RENGA_FUZZ_ITERATIONS per operation, RENGA_FUZZ_SEED to replay a run).
func TestSpecFuzz(t *testing.T) {
	t.Parallel()
	iterations := envInt("RENGA_FUZZ_ITERATIONS", 6)
	seed := uint64(envInt("RENGA_FUZZ_SEED", 1))
	t.Logf("seed %d, %d requests per operation and kind (replay with RENGA_FUZZ_SEED=%d)", seed, iterations, seed)

	env := servertest.Start(t)
	f := newFuzzer(t, env, seed)
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	spec.Servers = nil
	ops, err := pipeline.Operations(spec)
	if err != nil {
		t.Fatal(err)
	}
	patterns := make([]string, 0, len(ops))
	for p := range ops {
		patterns = append(patterns, p)
	}
	slices.Sort(patterns)
	total, findings, statuses := 0, map[string]int{}, map[int]int{}
	for _, pattern := range patterns {
		op := ops[pattern]
		for i := range 2 * iterations {
			validOnly := i%2 == 0
			finding, status, err := f.round(spec, op, validOnly)
			statuses[status]++
			total++
			if err != nil {
				t.Fatalf("%s: %v", op.ID, err)
			}
			if finding != "" {
				if findings[op.ID+": "+finding]++; findings[op.ID+": "+finding] == 1 {
					t.Errorf("%s %s", op.ID, finding)
				}
			}
		}
	}
	t.Logf("%d requests over %d operations, %d distinct findings; statuses %v", total, len(ops), len(findings), statuses)
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

// fuzzer holds the credentials and the IDs that exist, per path parameter.
type fuzzer struct {
	t        *testing.T
	env      *servertest.Env
	g        *specGen
	operator string
	owner    string
	intake   string
	agent    *specAgent
	ids      map[string][]string
}

func newFuzzer(t *testing.T, env *servertest.Env, seed uint64) *fuzzer {
	f := &fuzzer{t: t, env: env, g: &specGen{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}, ids: map[string][]string{}}
	f.operator = env.Token(t, servertest.AllScopes()...)
	// An owner whose organization has an intake key, a registered installation and a job.
	orgID, owner := agentOwner(t, env)
	f.owner = owner
	key := createIntakeKey(t, env, env, owner, "fuzz")
	other := createIntakeKey(t, env, env, owner, "fuzz-revocable")
	f.intake = key.Key
	f.agent = register(t, env, env, key.Key)
	job := createJob(t, env, owner, f.agent.ID, "uptime")
	operatorOrg := createOrg(t, env, f.operator, newSlug(), "Fuzz")
	inv := send(t, env, req{Method: http.MethodPost, Path: orgPath(operatorOrg.ID) + "/invitations", Token: f.operator,
		Body: jsonBody(map[string]string{"email": "fuzz-owner@example.com"}), Header: headers("Idempotency-Key", newKey())})
	var invitation struct {
		ID string `json:"id"`
	}
	inv.decode(t, &invitation)
	provider, _ := createProvider(t, env, f.operator, newProviderBody("fuzz", ""))
	f.ids["organization_id"] = []string{operatorOrg.ID, orgID}
	f.ids["invitation_id"] = []string{invitation.ID}
	f.ids["key_id"] = []string{other.ID}
	f.ids["installation_id"] = []string{f.agent.ID}
	f.ids["job_id"] = []string{job.ID}
	f.ids["provider_id"] = []string{provider.ID}
	return f
}

// round sends one generated request for op and returns what is wrong with the answer ("" if
// nothing).
func (f *fuzzer) round(spec *openapi3.T, op *pipeline.Operation, validOnly bool) (finding string, status int, err error) {
	o := op.Spec()
	g := f.g
	broken := ""
	pathParams := map[string]string{}
	query := url.Values{}
	header := http.Header{}
	params := append(openapi3.Parameters{}, spec.Paths.Find(op.Route).Parameters...)
	params = append(params, o.Parameters...)
	for _, ref := range params {
		p := ref.Value
		var v any
		if p.In == "path" && len(f.ids[p.Name]) > 0 && g.chance(0.7) {
			v = f.ids[p.Name][g.r.IntN(len(f.ids[p.Name]))]
		} else {
			v = g.valid(p.Schema, 1)
		}
		if !validOnly && broken == "" && g.chance(0.3) {
			v, broken = g.invalid(p.Schema, v)
			broken = p.Name + ": " + broken
		}
		if !p.Required && p.In != "path" && validOnly && g.chance(0.3) {
			continue
		}
		text := paramText(v)
		switch p.In {
		case "path":
			if text == "" {
				text = "x"
			}
			pathParams[p.Name] = text
		case "query":
			if arr, ok := v.([]any); ok {
				for _, x := range arr {
					query.Add(p.Name, paramText(x))
				}
			} else {
				query.Set(p.Name, text)
			}
		case "header":
			switch p.Name {
			case "If-Match":
				text = `"` + strconv.Itoa(1+g.r.IntN(3)) + `"`
			case "Idempotency-Key":
				text = newKey()
			}
			if validOnly || g.chance(0.8) {
				header.Set(p.Name, strings.Map(func(r rune) rune {
					if r < 0x20 || r == 0x7f || r > 0x7e {
						return 'x'
					}
					return r
				}, text))
			}
		}
	}
	path := op.Route
	for name, v := range pathParams {
		path = strings.ReplaceAll(path, "{"+name+"}", url.PathEscape(v))
	}
	target := path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var body []byte
	if rb := o.RequestBody; rb != nil && rb.Value != nil {
		if mt := rb.Value.Content.Get("application/json"); mt != nil {
			v := g.valid(mt.Schema, 0)
			if !validOnly && (broken == "" || g.chance(0.5)) {
				var what string
				v, what = g.invalid(mt.Schema, v)
				broken = strings.TrimPrefix(broken+"; body "+what, "; ")
			}
			var err error
			if body, err = json.Marshal(v); err != nil {
				return "", 0, err
			}
		}
	}
	r := req{Method: op.Method, Path: target, Body: body, Header: header}
	switch op.Auth {
	case pipeline.AuthOperator:
		r.Token = f.operator
		if op.ChangesOwnCredential {
			r.Token = f.env.Token(f.t, servertest.AllScopes()...) // it will not survive the call
		}
	case pipeline.AuthUser:
		r.Token = f.owner
	case pipeline.AuthIntake:
		r.Token = f.intake
	case pipeline.AuthInstallation:
		for k, vs := range f.agent.sign(op.Method, target, body, time.Now()) {
			r.Header[k] = vs
		}
	}
	rep, err := sendE(f.env, r)
	if err != nil {
		return "", 0, err
	}
	what := "valid request"
	if broken != "" {
		what = "request with " + broken
	}
	if finding, err := checkAnswer(spec, op, r.Header, target, body, pathParams, rep); err != nil || finding != "" {
		if finding != "" {
			finding = fmt.Sprintf("answered %d to a %s (%s %s): %s", rep.Status, what, op.Method, target, finding)
		}
		return finding, rep.Status, err
	}
	// Keep IDs that now exist for the next rounds (an organization created, a job queued, ...).
	if rep.Status == http.StatusCreated {
		var created struct {
			ID string `json:"id"`
		}
		if json.Unmarshal(rep.Body, &created) == nil {
			for param, prefix := range map[string]string{"organization_id": "org_", "invitation_id": "inv_", "key_id": "key_", "job_id": "job_", "provider_id": "idp_"} {
				if strings.HasPrefix(created.ID, prefix) && len(f.ids[param]) < 20 {
					f.ids[param] = append(f.ids[param], created.ID)
				}
			}
		}
	}
	return "", rep.Status, nil
}

// checkAnswer holds an answer to the spec: "" when it conforms, else what is wrong.
func checkAnswer(spec *openapi3.T, op *pipeline.Operation, reqHeader http.Header, target string, body []byte,
	pathParams map[string]string, rep reply) (string, error) {
	o := op.Spec()
	if rep.Status >= 500 {
		return fmt.Sprintf("a server error: %s", rep.Body), nil
	}
	if o.Responses.Value(strconv.Itoa(rep.Status)) == nil {
		return fmt.Sprintf("a status the operation does not declare: %s", rep.Body), nil
	}
	hr, err := http.NewRequestWithContext(context.Background(), op.Method, "http://renga.test"+target, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	hr.Header = reqHeader
	in := &openapi3filter.RequestValidationInput{Request: hr, PathParams: pathParams,
		Route:   &routers.Route{Spec: spec, Path: op.Route, PathItem: spec.Paths.Find(op.Route), Method: op.Method, Operation: o},
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	verr := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: rep.Status, Header: rep.Header, Body: io.NopCloser(bytes.NewReader(rep.Body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}})
	if verr != nil {
		msg := verr.Error()
		if len(msg) > 300 {
			msg = msg[:300]
		}
		return "a response the spec does not describe: " + msg, nil
	}
	// A problem's code is an open set in the spec (x-extensible-enum), which the validator does
	// not check: the codes this version may answer are ErrorCode's.
	if strings.HasPrefix(rep.Header.Get("Content-Type"), "application/problem+json") {
		var p struct {
			Error string `json:"error"`
		}
		if err := json.Unmarshal(rep.Body, &p); err != nil || !slices.ContainsFunc(spec.Components.Schemas["ErrorCode"].Value.Enum,
			func(c any) bool { return c == p.Error }) {
			return fmt.Sprintf("a problem whose code ErrorCode does not list: %s", rep.Body), nil
		}
	}
	// The values of the other open sets (x-extensible-enum), which the validator does not check, are
	// those this version's spec lists.
	if r := o.Responses.Value(strconv.Itoa(rep.Status)); r != nil && r.Value != nil {
		mt, _, _ := strings.Cut(rep.Header.Get("Content-Type"), ";")
		if c := r.Value.Content.Get(strings.TrimSpace(mt)); c != nil && strings.HasSuffix(strings.TrimSpace(mt), "json") {
			var v any
			if err := json.Unmarshal(rep.Body, &v); err == nil {
				if u := unlistedValues(c.Schema, v, "body"); len(u) > 0 {
					return "values its open sets do not list: " + strings.Join(u, ", "), nil
				}
			}
		}
	}
	return "", nil
}

// paramText is a parameter value as it goes in a path, query or header.
func paramText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case []any, map[string]any:
		b, _ := json.Marshal(x)
		return string(b)
	}
	return fmt.Sprint(v)
}

// TestFuzzCheckFindsNonConformingAnswers: the fuzzer's check is not a check that cannot fail.
func TestFuzzCheckFindsNonConformingAnswers(t *testing.T) {
	t.Parallel()
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	spec.Servers = nil
	ops, err := pipeline.Operations(spec)
	if err != nil {
		t.Fatal(err)
	}
	op := ops["GET /api/v1/operator/organizations/{organization_id}"]
	if op == nil {
		t.Fatal("no getOrganization in the spec")
	}
	target := "/api/v1/operator/organizations/org_" + strings.Repeat("0", 26)
	params := map[string]string{"organization_id": "org_" + strings.Repeat("0", 26)}
	problemHeader := http.Header{"Content-Type": {"application/problem+json"}}
	jsonHeader := http.Header{"Content-Type": {"application/json"}, "Etag": {`"1"`}}
	org := `{"id": "org_00000000000000000000000000", "slug": "acme", "display_name": "A", "state": "active",
		"suspended_reason": null, "purge_after": null, "version": 1, "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z"}`
	for name, c := range map[string]struct {
		rep  reply
		want string // "" for an answer that conforms
	}{
		"conforming 200":        {reply{Status: 200, Header: jsonHeader, Body: []byte(org)}, ""},
		"conforming 404":        {reply{Status: 404, Header: problemHeader, Body: []byte(`{"type": "t", "title": "Not found", "status": 404, "error": "not_found", "request_id": "req_1"}`)}, ""},
		"a 500":                 {reply{Status: 500, Header: problemHeader, Body: []byte(`{"type": "t", "title": "x", "status": 500, "error": "internal", "request_id": "req_1"}`)}, "server error"},
		"an undeclared status":  {reply{Status: 418, Header: problemHeader, Body: []byte(`{"type": "t", "title": "x", "status": 418, "error": "not_found", "request_id": "req_1"}`)}, "does not declare"},
		"a missing member":      {reply{Status: 200, Header: jsonHeader, Body: []byte(`{"id": "org_00000000000000000000000000"}`)}, "does not describe"},
		"an unknown error code": {reply{Status: 404, Header: problemHeader, Body: []byte(`{"type": "t", "title": "x", "status": 404, "error": "no_such_code", "request_id": "req_1"}`)}, "does not list"},
		"an unlisted state":     {reply{Status: 200, Header: jsonHeader, Body: []byte(strings.Replace(org, `"active"`, `"archived"`, 1))}, `open sets do not list: body.state: "archived"`},
		"text/plain":            {reply{Status: 404, Header: http.Header{"Content-Type": {"text/plain"}}, Body: []byte("404 page not found")}, "does not describe"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := checkAnswer(spec, op, http.Header{}, target, nil, params, c.rep)
			if err != nil {
				t.Fatal(err)
			}
			if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
				t.Errorf("checkAnswer = %q, want a finding containing %q", got, c.want)
			}
		})
	}
}
