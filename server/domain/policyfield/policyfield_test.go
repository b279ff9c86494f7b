package policyfield_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"renga.dev/renga/server/domain/policyfield"
)

// specSchemas are the spec's schema of each section, by section.
var specSchemas = map[policyfield.Section]string{
	policyfield.Limits:         "PolicyLimits",
	policyfield.LockedSettings: "LockedSettings",
	policyfield.Entitlements:   "Entitlements",
}

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	spec, err := openapi3.NewLoader().LoadFromFile("../../../openapi.yaml")
	if err != nil {
		t.Fatalf("load openapi.yaml: %v", err)
	}
	return spec
}

func schema(t *testing.T, spec *openapi3.T, name string) *openapi3.Schema {
	t.Helper()
	ref := spec.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		t.Fatalf("openapi.yaml has no schema %s", name)
	}
	return ref.Value
}

// TestTableMatchesSpec: every property of PolicyLimits, LockedSettings and Entitlements is in
// the table and the other way round, with the same kind and range.
func TestTableMatchesSpec(t *testing.T) {
	spec := loadSpec(t)
	for _, sec := range policyfield.Sections {
		s := schema(t, spec, specSchemas[sec.Name])
		var inTable []string
		for _, f := range policyfield.In(sec.Name) {
			inTable = append(inTable, f.Path.Name())
			prop := s.Properties[f.Path.Name()]
			if prop == nil || prop.Value == nil {
				t.Errorf("%s is in the table but not in %s", f.Path, specSchemas[sec.Name])
				continue
			}
			if err := sameField(f, prop.Value); err != nil {
				t.Errorf("%s: %v", f.Path, err)
			}
		}
		for name := range s.Properties {
			if !slices.Contains(inTable, name) {
				t.Errorf("%s.%s is in %s but not in the table", sec.Name, name, specSchemas[sec.Name])
			}
		}
	}
}

// sameField compares a field of the table with its schema in the spec.
func sameField(f policyfield.Field, s *openapi3.Schema) error {
	switch f.Kind {
	case policyfield.Integer:
		if !s.Type.Is("integer") || s.Format != "int64" {
			return fmt.Errorf("spec has %v %q, table has an int64", s.Type, s.Format)
		}
		if s.Min == nil {
			return fmt.Errorf("spec gives no minimum, table has %d", f.Min)
		}
		if int64(*s.Min) != f.Min {
			return fmt.Errorf("minimum %v in the spec, %d in the table", *s.Min, f.Min)
		}
		// Every limit declares its maximum (Unbounded, 2^62, for those with no other), so that
		// a client knows what the server accepts.
		if s.Max == nil {
			return fmt.Errorf("spec gives no maximum, table has %d", f.Max)
		}
		if int64(*s.Max) != f.Max {
			return fmt.Errorf("maximum %v in the spec, %d in the table", *s.Max, f.Max)
		}
	case policyfield.Boolean:
		if !s.Type.Is("boolean") {
			return fmt.Errorf("spec has %v, table has a boolean", s.Type)
		}
	case policyfield.StringSet:
		if !s.Type.Is("array") || s.Items == nil || !s.Items.Value.Type.Is("string") {
			return fmt.Errorf("spec has %v, table has a set of strings", s.Type)
		}
		if s.MaxItems == nil || *s.MaxItems != uint64(f.MaxItems) {
			return fmt.Errorf("maxItems %v in the spec, %d in the table", s.MaxItems, f.MaxItems)
		}
		it := s.Items.Value
		if it.MinLength != uint64(f.Items.MinLength) || it.MaxLength == nil || *it.MaxLength != uint64(f.Items.MaxLength) ||
			it.Pattern != f.Items.Pattern {
			return fmt.Errorf("items %d..%v %q in the spec, %+v in the table", it.MinLength, it.MaxLength, it.Pattern, f.Items)
		}
	default:
		return fmt.Errorf("unknown kind %v", f.Kind)
	}
	return nil
}

// TestEffectivePolicyMatchesSpec: the EffectivePolicy schema shows every field of the table,
// each section under its effective name, with the effective schema of its kind.
func TestEffectivePolicyMatchesSpec(t *testing.T) {
	spec := loadSpec(t)
	e := schema(t, spec, "EffectivePolicy")
	refs := map[policyfield.Kind]string{
		policyfield.Integer:   "#/components/schemas/EffectiveInteger",
		policyfield.Boolean:   "#/components/schemas/EffectiveBoolean",
		policyfield.StringSet: "#/components/schemas/EffectiveStrings",
	}
	sections := []string{"organization_id"}
	for _, sec := range policyfield.Sections {
		sections = append(sections, sec.EffectiveName)
		ref := e.Properties[sec.EffectiveName]
		if ref == nil || ref.Value == nil {
			t.Errorf("EffectivePolicy has no %s", sec.EffectiveName)
			continue
		}
		s := ref.Value
		var names []string
		for _, f := range policyfield.In(sec.Name) {
			names = append(names, f.Path.Name())
			if p := s.Properties[f.Path.Name()]; p == nil || p.Ref != refs[f.Kind] {
				t.Errorf("EffectivePolicy.%s.%s is not a %s", sec.EffectiveName, f.Path.Name(), refs[f.Kind])
			}
		}
		if got := slices.Sorted(func(yield func(string) bool) {
			for n := range s.Properties {
				if !yield(n) {
					return
				}
			}
		}); !slices.Equal(got, slices.Sorted(slices.Values(names))) {
			t.Errorf("EffectivePolicy.%s lists %v, the table %v", sec.EffectiveName, got, names)
		}
		if !slices.Equal(slices.Sorted(slices.Values(s.Required)), slices.Sorted(slices.Values(names))) {
			t.Errorf("EffectivePolicy.%s requires %v, the table has %v", sec.EffectiveName, s.Required, names)
		}
	}
	for name := range e.Properties {
		if !slices.Contains(sections, name) {
			t.Errorf("EffectivePolicy.%s is not a section of the table", name)
		}
	}
}

// TestTable: paths are unique and well formed, integer ranges are not empty, and exactly the
// limits and entitlements have a built-in default, of their kind.
func TestTable(t *testing.T) {
	seen := map[policyfield.Path]bool{}
	for _, f := range policyfield.Fields {
		if seen[f.Path] {
			t.Errorf("%s twice", f.Path)
		}
		seen[f.Path] = true
		if !policyfield.IsSection(string(f.Path.Section())) || f.Path.Name() == "" {
			t.Errorf("%s: not section.name", f.Path)
		}
		if f.Description == "" {
			t.Errorf("%s has no description", f.Path)
		}
		if f.Kind == policyfield.Integer && (f.Min > f.Max || f.Max > policyfield.Unbounded || f.Min < -policyfield.Unbounded) {
			t.Errorf("%s: range %d..%d", f.Path, f.Min, f.Max)
		}
		wantDefault := f.Path.Section() != policyfield.LockedSettings
		switch d := f.Default.(type) {
		case nil:
			if wantDefault {
				t.Errorf("%s has no built-in default", f.Path)
			}
		case int64:
			if !wantDefault || f.Kind != policyfield.Integer || d < f.Min || d > f.Max {
				t.Errorf("%s: built-in default %d", f.Path, d)
			}
		case bool:
			if !wantDefault || f.Kind != policyfield.Boolean {
				t.Errorf("%s: built-in default %v", f.Path, d)
			}
		default:
			t.Errorf("%s: built-in default of type %T", f.Path, d)
		}
	}
}

func TestPath(t *testing.T) {
	for _, c := range []struct {
		path          policyfield.Path
		section, name string
	}{
		{policyfield.MaxAgents, "limits", "max_agents"},
		{policyfield.AllowedEmailDomains, "locked_settings", "allowed_email_domains"},
		{"entitlements", "entitlements", ""},
	} {
		if s, n := c.path.Section(), c.path.Name(); string(s) != c.section || n != c.name {
			t.Errorf("%s: section %q name %q, want %q %q", c.path, s, n, c.section, c.name)
		}
	}
	if _, ok := policyfield.Lookup("limits.max_cars"); ok {
		t.Errorf("Lookup found an unknown field")
	}
	if f, ok := policyfield.Lookup(policyfield.Jobs); !ok || f.Kind != policyfield.Boolean {
		t.Errorf("Lookup(jobs) = %+v, %v", f, ok)
	}
}
