package shortpath

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// frameworkServer is every call the framework's server answers, the optional ones included, so
// that wrapping it hides none of them: tf6server finds the optional calls (list resources,
// actions, state stores) by asserting these interfaces, deprecated only because they are to
// be folded into ProviderServer.
type frameworkServer interface {
	tfprotov6.ProviderServer
	tfprotov6.ProviderServerWithListResource //nolint:staticcheck // what tf6server asserts (above)
	tfprotov6.ProviderServerWithActions      //nolint:staticcheck // what tf6server asserts (above)
	tfprotov6.ProviderServerWithStateStores  //nolint:staticcheck // what tf6server asserts (above)
}

// Wrap returns the framework's server fw with the shorter path for the resources that
// factories make (those of them that qualify, see simple). providerTypeName is the provider's
// type name (its Metadata's), data what the provider's Configure gave resources as
// ResourceData: the same value the framework passes to each resource's Configure. data must be
// nil until Configure succeeded, and stay nil if Configure deferred (the framework then answers
// reads itself, deferring them).
func Wrap(fw tfprotov6.ProviderServer, providerTypeName string, data func() any, factories ...func() resource.Resource) tfprotov6.ProviderServer {
	full, ok := fw.(frameworkServer)
	if !ok {
		return fw
	}
	s := &server{frameworkServer: full, data: data, types: map[string]*resourceType{}, answered: map[string]*atomic.Int64{}}
	for _, call := range []string{callUpgrade, callRead, callPlan, callApply, callValidate} {
		s.answered[call] = new(atomic.Int64)
	}
	for _, f := range factories {
		var md resource.MetadataResponse
		f().Metadata(context.Background(), resource.MetadataRequest{ProviderTypeName: providerTypeName}, &md)
		s.types[md.TypeName] = &resourceType{factory: f}
	}
	return s
}

type server struct {
	frameworkServer
	data  func() any
	types map[string]*resourceType
	// answered counts, by call, the calls this package answered rather than the framework
	// (for tests).
	answered map[string]*atomic.Int64
	// frameworkTypes are the resource types the framework's server lists, when it lists them
	// without a word (see registered), asked once.
	metadataOnce   sync.Once
	frameworkTypes map[string]bool
}

// The calls the shorter path answers (in some cases).
const (
	callUpgrade = "UpgradeResourceState"
	callRead    = "ReadResource"
	callPlan    = "PlanResourceChange"
	callApply   = "ApplyResourceChange"
	// callValidate is ValidateResourceConfig.
	callValidate = "ValidateResourceConfig"
)

// answer counts a call answered here.
func (s *server) answer(call string) { s.answered[call].Add(1) }

// resourceType is what the shorter path needs of a resource type, worked out on first use (as
// the framework works out schemas on first use: a provider process that only validates never
// needs them).
type resourceType struct {
	factory func() resource.Resource
	once    sync.Once
	ok      bool // simple: the shorter path answers for it
	schema  schema.Schema
	typ     tftypes.Type
	names   []string // the schema's attributes, sorted
	// plan is what planning needs of the schema; nil when the framework plans this type.
	plan *planSchema
	// check is the schema's attributes whose validation the shorter path runs; nil when the
	// framework validates this type (newValidateSchema).
	check []checkedAttribute
}

// fast is the resource type typeName when the shorter path answers for it, else nil.
func (s *server) fast(ctx context.Context, typeName string) *resourceType {
	t := s.types[typeName]
	if t == nil {
		return nil
	}
	t.once.Do(func() {
		r := t.factory()
		var resp resource.SchemaResponse
		r.Schema(ctx, resource.SchemaRequest{}, &resp)
		if resp.Diagnostics.HasError() || !simple(r, resp.Schema) {
			return
		}
		t.schema, t.typ, t.ok = resp.Schema, resp.Schema.Type().TerraformType(ctx), true
		t.names = slices.Sorted(maps.Keys(resp.Schema.Attributes))
		t.plan = newPlanSchema(resp.Schema, t.names)
		t.check = newValidateSchema(r, resp.Schema, len(resp.Diagnostics) == 0)
	})
	if !t.ok {
		return nil
	}
	return t
}

// simple says whether the framework's passes over r's state change nothing: no blocks (null
// blocks made empty), no write-only attribute (nulled in every state returned), only the
// framework's own types (no semantic equality), no identity.
func simple(r resource.Resource, s schema.Schema) bool {
	if _, ok := r.(resource.ResourceWithIdentity); ok || len(s.Blocks) > 0 {
		return false
	}
	return simpleAttributes(s.Attributes)
}

func simpleAttributes(attrs map[string]schema.Attribute) bool {
	for _, a := range attrs {
		if a.IsWriteOnly() || !baseType(a.GetType()) {
			return false
		}
		switch a := a.(type) {
		case schema.SingleNestedAttribute:
			if !simpleAttributes(a.Attributes) {
				return false
			}
		case schema.NestedAttribute:
			return false // lists, sets and maps of objects: not needed yet
		}
	}
	return true
}

// baseType says whether t is one of the framework's own types (or made of them), whose values
// have no semantic equality.
func baseType(t attr.Type) bool {
	switch t := t.(type) {
	case basetypes.StringType, basetypes.BoolType, basetypes.Int64Type, basetypes.Int32Type,
		basetypes.Float64Type, basetypes.Float32Type, basetypes.NumberType:
		return true
	case basetypes.SetType:
		return baseType(t.ElemType)
	case basetypes.ListType:
		return baseType(t.ElemType)
	case basetypes.MapType:
		return baseType(t.ElemType)
	case basetypes.ObjectType:
		for _, at := range t.AttrTypes {
			if !baseType(at) {
				return false
			}
		}
		return true
	}
	return false
}

// unconvertible is the first attribute of state (by name) whose value does not convert to its
// attribute's value type, and why.
func (t *resourceType) unconvertible(ctx context.Context, state tftypes.Value) (string, error) {
	if state.IsNull() {
		return "", nil
	}
	var attrs map[string]tftypes.Value
	if err := state.As(&attrs); err != nil {
		return "", err
	}
	for _, name := range t.names {
		if _, err := t.schema.Attributes[name].GetType().ValueFromTerraform(ctx, attrs[name]); err != nil {
			return name, err
		}
	}
	return "", nil
}

// checkNewState is what the framework says after a resource's Read, Create or Update without
// errors, when it converts each attribute of the new state to its value (for semantic
// equality): an error at the first attribute that does not convert. (The framework's order is
// the schema map's, so for two such attributes its answer varies; this takes them by name.) A
// resource that builds its state from the framework's values always passes.
func (t *resourceType) checkNewState(ctx context.Context, state tftypes.Value) diag.Diagnostics {
	var diags diag.Diagnostics
	if name, err := t.unconvertible(ctx, state); err != nil {
		diags.AddAttributeError(path.Root(name), "State Read Error",
			"An unexpected error was encountered trying to convert an attribute value from the state. This is always an error in the provider. Please report the following to the provider developer:\n\n"+
				"Error: "+err.Error())
	}
	return diags
}

// unconvertibleState is the framework's error for a state that does not encode.
func unconvertibleState(err error) *tfprotov6.Diagnostic {
	return &tfprotov6.Diagnostic{
		Severity: tfprotov6.DiagnosticSeverityError,
		Summary:  "Unable to Convert State",
		Detail: "An unexpected error was encountered when converting the state to the protocol type. " +
			"This is always an issue in terraform-plugin-framework used to implement the provider and should be reported to the provider developers.\n\n" +
			"Please report this to the provider developer:\n\n" +
			"Unable to create DynamicValue: " + err.Error(),
	}
}

// protoDiagnostics is diags as the framework sends them.
func protoDiagnostics(ctx context.Context, diags diag.Diagnostics) []*tfprotov6.Diagnostic {
	var out []*tfprotov6.Diagnostic
	for _, d := range diags {
		pd := &tfprotov6.Diagnostic{Summary: d.Summary(), Detail: d.Detail(), Severity: tfprotov6.DiagnosticSeverityInvalid}
		switch d.Severity() {
		case diag.SeverityError:
			pd.Severity = tfprotov6.DiagnosticSeverityError
		case diag.SeverityWarning:
			pd.Severity = tfprotov6.DiagnosticSeverityWarning
		}
		if dp, ok := d.(diag.DiagnosticWithPath); ok {
			p, err := attributePath(ctx, dp.Path())
			if err != nil {
				out = append(out, &tfprotov6.Diagnostic{
					Severity: tfprotov6.DiagnosticSeverityError,
					Summary:  "Unable to Convert Attribute Path",
					Detail: "An unexpected error occurred while trying to convert an attribute path. " +
						"This is either an error in terraform-plugin-framework or a custom attribute type used by the provider. " +
						"Please report the following to the provider developers.\n\n" +
						fmt.Sprintf("Attribute Path: %s\n", dp.Path().String()) +
						fmt.Sprintf("Original Error: %s", err),
				})
			}
			pd.Attribute = p
		}
		out = append(out, pd)
	}
	return out
}

// attributePath is p as a Terraform attribute path.
func attributePath(ctx context.Context, p path.Path) (*tftypes.AttributePath, error) {
	var steps []tftypes.AttributePathStep
	for _, st := range p.Steps() {
		switch st := st.(type) {
		case path.PathStepAttributeName:
			steps = append(steps, tftypes.AttributeName(string(st)))
		case path.PathStepElementKeyInt:
			steps = append(steps, tftypes.ElementKeyInt(int64(st)))
		case path.PathStepElementKeyString:
			steps = append(steps, tftypes.ElementKeyString(string(st)))
		case path.PathStepElementKeyValue:
			v, err := st.ToTerraformValue(ctx)
			if err != nil {
				return nil, fmt.Errorf("unable to convert attr.Value (%s) to tftypes.Value: %w", st.Value.String(), err)
			}
			steps = append(steps, tftypes.ElementKeyValue(v))
		}
	}
	return tftypes.NewAttributePathWithSteps(steps), nil
}
