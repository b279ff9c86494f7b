package api

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// openSets maps each open set of spec's component schemas ("Schema" or "Schema.property", with
// [] for array items) to its values, and each closed enum at such a place to its values too, so
// that a closed list of a release compares with the open list that replaced it.
func openSets(t *testing.T, path string) (open, all map[string][]string) {
	t.Helper()
	spec, err := openapi3.NewLoader().LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	open, all = map[string][]string{}, map[string][]string{}
	var visit func(where string, s *openapi3.SchemaRef, depth int)
	visit = func(where string, ref *openapi3.SchemaRef, depth int) {
		if ref == nil || ref.Value == nil || depth > 8 {
			return
		}
		s := ref.Value
		if xs, ok := s.Extensions["x-extensible-enum"].([]any); ok {
			for _, x := range xs {
				open[where] = append(open[where], fmt.Sprint(x))
				all[where] = append(all[where], fmt.Sprint(x))
			}
		}
		for _, x := range s.Enum {
			all[where] = append(all[where], fmt.Sprint(x))
		}
		if depth > 0 && ref.Ref != "" {
			return // its members are visited under its own name
		}
		for name, p := range s.Properties {
			visit(where+"."+name, p, depth+1)
		}
		visit(where+"[]", s.Items, depth+1)
		for _, sub := range s.AllOf {
			visit(where, sub, depth+1)
		}
	}
	for name, s := range spec.Components.Schemas {
		visit(name, s, 0)
	}
	return open, all
}

// removedValues lists, as the changelog must declare them, the values of spec's open sets that
// the last release had at the same place (in an open set or a closed enum) and spec has not.
func removedValues(t *testing.T, spec string) []string {
	t.Helper()
	_, released := openSets(t, "openapi.released.yaml")
	current, _ := openSets(t, spec)
	var removed []string
	for where, values := range current {
		for _, v := range released[where] {
			if !contains(values, v) {
				removed = append(removed, fmt.Sprintf("removed the value `%s` of the open set `%s`", v, where))
			}
		}
	}
	sort.Strings(removed)
	return removed
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// undeclared lists the removals of spec that changelog does not declare (a line containing
// the removal's words).
func undeclared(t *testing.T, spec, changelog string) []string {
	t.Helper()
	text, err := os.ReadFile(changelog)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range removedValues(t, spec) {
		if !strings.Contains(string(text), r) {
			out = append(out, r)
		}
	}
	return out
}

// TestRemovedEnumValuesAreDeclared: oasdiff does not compare the values of a response's open
// set (x-extensible-enum); this does. Adding one is not breaking, removing one is (a client
// acting on that value never sees it again): it fails unless CHANGELOG.md declares it under
// Unreleased → Breaking, as "removed the value `v` of the open set `Schema.property`".
func TestRemovedEnumValuesAreDeclared(t *testing.T) {
	if u := undeclared(t, "../openapi.yaml", "../CHANGELOG.md"); len(u) > 0 {
		t.Fatalf("openapi.yaml removes values of open sets that CHANGELOG.md does not declare:\n%s", strings.Join(u, "\n"))
	}
	open, _ := openSets(t, "../openapi.yaml")
	for _, where := range []string{"Problem.error", "Organization.state", "Job.state", "Transfer.state", "AuditEvent.outcome"} {
		if len(open[where]) == 0 {
			t.Errorf("%s is not an open set this check sees", where)
		}
	}

	grown := grow(t, edit{"x-extensible-enum: [active, suspended, deletion_pending, purging, moved]",
		"x-extensible-enum: [active, suspended, deletion_pending, purging, moved, archived]", 2})
	if u := undeclared(t, grown, "../CHANGELOG.md"); len(u) > 0 {
		t.Errorf("an added value is reported as removed:\n%s", strings.Join(u, "\n"))
	}

	shrunk := grow(t, edit{"x-extensible-enum: [queued, delivered, succeeded, failed]", "x-extensible-enum: [queued, delivered, succeeded]", 1})
	u := undeclared(t, shrunk, "../CHANGELOG.md")
	if want := "removed the value `failed` of the open set `Job.state`"; len(u) != 1 || u[0] != want {
		t.Fatalf("removing a job state is reported as %q, not [%s]", u, want)
	}
	changelog, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	declared := t.TempDir() + "/CHANGELOG.md"
	if err := os.WriteFile(declared, []byte(string(changelog)+"- "+u[0]+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if u := undeclared(t, shrunk, declared); len(u) > 0 {
		t.Errorf("a declared removal still fails: %s", u)
	}
}
