package apitest

import (
	"fmt"
	"strings"
	"testing"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/pipeline"
)

// TestSpecDeclaresTheContract checks what every operation of openapi.yaml must say, so that a
// new operation cannot slip in without its scope, errors or documentation.
func TestSpecDeclaresTheContract(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	ops, err := pipeline.Operations(spec)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, op := range ops {
		o := op.Spec()
		name := op.Method + " " + op.Route
		if seen[op.ID] {
			t.Errorf("%s: operationId %s is not unique", name, op.ID)
		}
		seen[op.ID] = true
		if len(o.Tags) != 1 {
			t.Errorf("%s: needs exactly one tag", name)
		}
		if strings.TrimSpace(o.Summary) == "" {
			t.Errorf("%s: no summary", name)
		}
		want := []string{"429", "default"}
		if op.Auth != "public" {
			want = append(want, "401")
		}
		if op.Auth == "operator" && op.Scope != "authenticated" {
			want = append(want, "403")
		}
		if o.RequestBody != nil || len(o.Parameters) > 0 || strings.Contains(op.Route, "{") {
			want = append(want, "400")
		}
		if strings.Contains(op.Route, "{") {
			want = append(want, "404")
		}
		if op.IfMatch {
			want = append(want, "412", "428")
		}
		// Any operation that takes an Idempotency-Key can answer 409 idempotency_key_reused.
		if op.KeyAccepted {
			want = append(want, "409")
		}
		if op.Auth != "public" {
			if r := o.Responses.Value("401"); r != nil && r.Value != nil && r.Value.Headers["WWW-Authenticate"] == nil {
				t.Errorf("%s: the 401 does not declare WWW-Authenticate", name)
			}
		}
		for _, code := range want {
			r := o.Responses.Value(code)
			if r == nil || r.Value == nil || r.Value.Content.Get("application/problem+json") == nil {
				t.Errorf("%s: no %s application/problem+json response", name, code)
			}
		}
		for code, r := range o.Responses.Map() {
			if strings.HasPrefix(code, "2") && r.Value != nil && r.Value.Content != nil {
				for mt, c := range r.Value.Content {
					if c.Schema == nil {
						t.Errorf("%s: %s %s has no schema", name, code, mt)
					}
				}
			}
		}
	}
	// The error code enum is the set the server uses.
	codes := spec.Components.Schemas["ErrorCode"].Value.Enum
	if len(codes) < 20 {
		t.Errorf("ErrorCode enum has %d codes", len(codes))
	}
	// A problem's `error` is the same list as an open set (x-extensible-enum), so that adding a
	// code never breaks a deployed client (oasdiff treats an enum of a response as closed).
	open, _ := spec.Components.Schemas["Problem"].Value.Properties["error"].Value.Extensions["x-extensible-enum"].([]any)
	if fmt.Sprint(open) != fmt.Sprint(codes) {
		t.Errorf("Problem.error's x-extensible-enum differs from ErrorCode's enum:\n%v\n%v", open, codes)
	}
}
