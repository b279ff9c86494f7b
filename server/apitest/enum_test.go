package apitest

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"renga.dev/renga/gen/api"
)

// closedTwins pairs each closed enumeration the spec keeps (for request validation or typed
// constants) with the open lists (x-extensible-enum) of the response members that carry the same
// values, as "Schema.property" (a component schema's property) or "Schema" (the component
// itself).
var closedTwins = map[string][]string{
	"ErrorCode":         {"Problem.error"},
	"OrganizationState": {"Organization.state", "OrgSummary.state"},
	"InvitationState":   {"Invitation.state"},
	"AuditOutcome":      {"AuditEvent.outcome"},
	"TransferState":     {"Transfer.state"},
	"ProviderProtocol":  {"IdentityProvider.protocol"},
	"JobResult.status":  {"JobReport.status"},
}

// requestOnly are closed enumerations among the component schemas that only requests carry (no
// response member has their values), and why. None yet.
var requestOnly = map[string]string{}

// closedInResponses are the response values allowed a closed enum, and why.
var closedInResponses = map[string]string{
	// A marker, "true" or absent: not a set that grows.
	"header Idempotent-Replayed": "",
}

// TestResponseEnumerationsAreOpen: the evolution rule of openapi.yaml's description. No response
// body or header carries a closed enum (a new value would break deployed clients); every closed
// enumeration kept as a component has open twins with exactly its values.
func TestResponseEnumerationsAreOpen(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range enumerationProblems(spec) {
		t.Error(p)
	}
	// The check fails on what it is for: a closed enum in a response, an open twin that lacks a
	// value, a closed enumeration without twins.
	spec.Components.Schemas["Job"].Value.Properties["state"].Value.Enum = []any{"queued"}
	spec.Components.Schemas["Invitation"].Value.Properties["state"].Value.Extensions["x-extensible-enum"] = []any{"pending"}
	spec.Components.Schemas["Slug"].Value.Enum = []any{"acme"}
	got := strings.Join(enumerationProblems(spec), "\n")
	org := spec.Components.Schemas["Organization"]
	if u := unlistedValues(org, map[string]any{"state": "active"}, "body"); len(u) > 0 {
		t.Errorf("a listed state is reported: %v", u)
	}
	if u := unlistedValues(org, map[string]any{"state": "archived"}, "body"); fmt.Sprint(u) != `[body.state: "archived"]` {
		t.Errorf("an unlisted state is reported as %v", u)
	}
	for _, want := range []string{"Job.state", "Invitation.state", "Slug is a closed enum"} {
		if !strings.Contains(got, want) {
			t.Errorf("a spec breaking the rule at %s passes:\n%s", want, got)
		}
	}
}

// enumerationProblems lists where spec breaks the evolution rule.
func enumerationProblems(spec *openapi3.T) []string {
	var problems []string
	bad := map[string]bool{}
	var visit func(where string, s *openapi3.SchemaRef, seen map[*openapi3.Schema]bool)
	visit = func(where string, ref *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		seen[ref.Value] = true
		s := ref.Value
		if ref.Ref != "" {
			where = strings.TrimPrefix(ref.Ref, "#/components/schemas/")
		}
		if len(s.Enum) > 0 {
			bad[where] = true
		}
		for name, p := range s.Properties {
			visit(where+"."+name, p, seen)
		}
		visit(where+"[]", s.Items, seen)
		if s.AdditionalProperties.Schema != nil {
			visit(where+"{}", s.AdditionalProperties.Schema, seen)
		}
		for _, list := range []openapi3.SchemaRefs{s.AllOf, s.OneOf, s.AnyOf} {
			for _, sub := range list {
				visit(where, sub, seen)
			}
		}
	}
	responses := 0
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			for status, r := range op.Responses.Map() {
				if r.Value == nil {
					continue
				}
				responses++
				for name, h := range r.Value.Headers {
					if h.Value != nil && h.Value.Schema != nil && h.Value.Schema.Value != nil && len(h.Value.Schema.Value.Enum) > 0 {
						if _, ok := closedInResponses["header "+name]; !ok {
							bad[fmt.Sprintf("header %s of %s %s %s", name, method, path, status)] = true
						}
					}
				}
				for mt, c := range r.Value.Content {
					visit(fmt.Sprintf("%s %s %s %s", method, path, status, mt), c.Schema, map[*openapi3.Schema]bool{})
				}
			}
		}
	}
	if responses < 50 {
		return []string{fmt.Sprintf("only %d responses walked", responses)}
	}
	if len(bad) > 0 {
		var list []string
		for w := range bad {
			list = append(list, w)
		}
		sort.Strings(list)
		problems = append(problems, "closed enums in responses (declare them type: string with x-extensible-enum):\n"+strings.Join(list, "\n"))
	}

	// lookup finds "Schema" or "Schema.property".
	lookup := func(name string) *openapi3.Schema {
		schema, prop, _ := strings.Cut(name, ".")
		ref := spec.Components.Schemas[schema]
		if ref == nil || ref.Value == nil {
			return nil
		}
		if prop == "" {
			return ref.Value
		}
		if p := ref.Value.Properties[prop]; p != nil {
			return p.Value
		}
		return nil
	}
	for closed, twins := range closedTwins {
		c := lookup(closed)
		if c == nil || len(c.Enum) == 0 {
			problems = append(problems, closed+" is not a closed enum")
			continue
		}
		for _, twin := range twins {
			o := lookup(twin)
			if o == nil {
				problems = append(problems, twin+": no such schema or property")
				continue
			}
			open, _ := o.Extensions["x-extensible-enum"].([]any)
			if len(o.Enum) > 0 || fmt.Sprint(open) != fmt.Sprint(c.Enum) {
				problems = append(problems, fmt.Sprintf("%s (x-extensible-enum %v, enum %v) is not the open set of %s's values %v", twin, open, o.Enum, closed, c.Enum))
			}
		}
	}
	// Every closed enumeration among the component schemas has its twins listed above, so that
	// one cannot grow without the other.
	for name, s := range spec.Components.Schemas {
		names := []string{}
		if len(s.Value.Enum) > 0 {
			names = append(names, name)
		}
		for prop, p := range s.Value.Properties {
			if p.Ref == "" && p.Value != nil && len(p.Value.Enum) > 0 {
				names = append(names, name+"."+prop)
			}
		}
		for _, n := range names {
			if _, ok := requestOnly[n]; !ok && closedTwins[n] == nil {
				problems = append(problems, n+" is a closed enum: list its open twins in closedTwins, or it in requestOnly")
			}
		}
	}
	return problems
}

// unlistedValues lists the values in v (a decoded JSON body) that an open set
// (x-extensible-enum) of ref, at the same place, does not list. The validator does not check
// open sets; the server answers only the values its own spec lists (a client of this version
// may rely on them; a new value comes with the spec that lists it).
func unlistedValues(ref *openapi3.SchemaRef, v any, where string) []string {
	if ref == nil || ref.Value == nil {
		return nil
	}
	s := ref.Value
	var out []string
	if list, ok := s.Extensions["x-extensible-enum"].([]any); ok {
		if str, ok := v.(string); ok && !slices.Contains(list, any(str)) {
			out = append(out, fmt.Sprintf("%s: %q", where, str))
		}
	}
	for _, sub := range s.AllOf {
		out = append(out, unlistedValues(sub, v, where)...)
	}
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			if p := s.Properties[k]; p != nil {
				out = append(out, unlistedValues(p, val, where+"."+k)...)
			} else {
				out = append(out, unlistedValues(s.AdditionalProperties.Schema, val, where+"."+k)...)
			}
		}
	case []any:
		for i, val := range x {
			out = append(out, unlistedValues(s.Items, val, fmt.Sprintf("%s[%d]", where, i))...)
		}
	}
	return out
}
