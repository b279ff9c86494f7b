// Package refresh serves the two calls Terraform makes for each resource it refreshes,
// UpgradeResourceState and ReadResource, for simple resources without the framework's generic
// passes over the state, and leaves every other call, and every case it does not cover, to the
// framework's server.
//
// In a refresh-only plan of examples/scale (bench/terraform_load_test.go), these two calls were
// nearly all the provider did, and most of their CPU was the framework's, not the resources':
// for each state it walks every null attribute looking up its schema (to turn null blocks into
// empty ones), converts the old and the new state to its attribute values by path (for custom
// types' semantic equality), walks the state again for write-only attributes, and sets up its
// loggers. For a resource with no blocks, no write-only attributes, no custom types and no
// identity, these passes change nothing, and can only fail where a value does not convert to
// its attribute's type; what is left is what this package does: JSON or msgpack to a value of
// the schema's type, that conversion check, the resource's own Configure and Read, and the
// value back to msgpack, with the same functions the framework calls. TestSameAnswers holds the
// two paths to the same responses, byte for byte. (The framework's trace logs of these calls,
// TF_LOG_SDK_FRAMEWORK=trace, are not written for the calls answered here.)
package refresh

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
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
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
	s := &server{frameworkServer: full, data: data, types: map[string]*resourceType{}}
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
	// answered counts the calls this package answered rather than the framework (for tests).
	answered atomic.Int64
}

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

// unmarshalOpts are the framework's for stored state: attributes the schema no longer has
// are dropped.
var unmarshalOpts = tfprotov6.UnmarshalOpts{ValueFromJSONOpts: tftypes.ValueFromJSONOpts{IgnoreUndefinedAttributes: true}}

// UpgradeResourceState of a state stored with the schema's current version is the framework's
// passthrough: the stored JSON read as the schema's type (by valueFromJSON, else by tftypes as
// the framework does), sent back as msgpack. Anything else (an older version, a flatmap state,
// a state that does not read) is the framework's.
func (s *server) UpgradeResourceState(ctx context.Context, req *tfprotov6.UpgradeResourceStateRequest) (*tfprotov6.UpgradeResourceStateResponse, error) {
	t := s.fast(ctx, req.TypeName)
	if t == nil || req.RawState == nil || req.Version != t.schema.Version {
		return s.frameworkServer.UpgradeResourceState(ctx, req)
	}
	v, ok := tftypes.Value{}, false
	if req.RawState.JSON != nil {
		v, ok = valueFromJSON(req.RawState.JSON, t.typ)
	}
	if !ok {
		var err error
		if v, err = req.RawState.UnmarshalWithOpts(t.typ, unmarshalOpts); err != nil {
			return s.frameworkServer.UpgradeResourceState(ctx, req)
		}
	}
	dv, err := tfprotov6.NewDynamicValue(t.typ, v)
	if err != nil {
		return s.frameworkServer.UpgradeResourceState(ctx, req)
	}
	s.answered.Add(1)
	return &tfprotov6.UpgradeResourceStateResponse{UpgradedState: &dv}, nil
}

// ReadResource calls the resource's Configure and Read as the framework does, for a state
// with no private data and no identity once the provider is configured; anything else is the
// framework's. Read gets no private state to write to and no provider meta (the framework's
// types for them are internal): neither resource uses them, and a resource that starts to must
// leave this path (Wrap's list), since its Private.SetKey would fail here.
func (s *server) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	t := s.fast(ctx, req.TypeName)
	if t == nil || req.CurrentState == nil || len(req.Private) > 0 || req.CurrentIdentity != nil {
		return s.frameworkServer.ReadResource(ctx, req)
	}
	data := s.data()
	if data == nil {
		return s.frameworkServer.ReadResource(ctx, req)
	}
	current, err := req.CurrentState.Unmarshal(t.typ)
	if err != nil || !current.IsKnown() {
		return s.frameworkServer.ReadResource(ctx, req)
	}
	// After a Read without errors, the framework converts every attribute of the state it was
	// given to the attribute's value type (for semantic equality), and fails the read when one
	// does not convert (a number out of an Int64's range, say). Such a state is left to the
	// framework from the start.
	if _, err := t.unconvertible(ctx, current); err != nil {
		return s.frameworkServer.ReadResource(ctx, req)
	}
	r := t.factory()
	if rc, ok := r.(resource.ResourceWithConfigure); ok {
		var cresp resource.ConfigureResponse
		rc.Configure(ctx, resource.ConfigureRequest{ProviderData: data}, &cresp)
		if cresp.Diagnostics.HasError() {
			// Configure does nothing else: the framework's path says it again, its way.
			return s.frameworkServer.ReadResource(ctx, req)
		}
		// The framework drops Configure's warnings here (Read's diagnostics replace them).
	}
	readReq := resource.ReadRequest{State: tfsdk.State{Schema: t.schema, Raw: current.Copy()}}
	if req.ClientCapabilities != nil {
		readReq.ClientCapabilities.DeferralAllowed = req.ClientCapabilities.DeferralAllowed
	}
	readResp := resource.ReadResponse{State: tfsdk.State{Schema: t.schema, Raw: current.Copy()}}
	r.Read(ctx, readReq, &readResp)

	diags := readResp.Diagnostics
	if !diags.HasError() && readResp.Identity != nil {
		diags.AddError("Unexpected Read Response",
			"An unexpected error was encountered when creating the read response. New identity data was returned by the provider read operation, but the resource does not indicate identity support.\n\n"+
				"This is always a problem with the provider and should be reported to the provider developer.")
	}
	// The framework's conversion of the new state (the other half of its semantic equality
	// pass); a Read that builds its state from the framework's values always passes it.
	if !diags.HasError() {
		if name, err := t.unconvertible(ctx, readResp.State.Raw); err != nil {
			diags.AddAttributeError(path.Root(name), "State Read Error",
				"An unexpected error was encountered trying to convert an attribute value from the state. This is always an error in the provider. Please report the following to the provider developer:\n\n"+
					"Error: "+err.Error())
		}
	}
	resp := &tfprotov6.ReadResourceResponse{Diagnostics: protoDiagnostics(ctx, diags)}
	if readResp.Deferred != nil {
		resp.Deferred = &tfprotov6.Deferred{Reason: tfprotov6.DeferredReason(readResp.Deferred.Reason)}
	}
	newState, err := tfprotov6.NewDynamicValue(t.typ, readResp.State.Raw)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, &tfprotov6.Diagnostic{
			Severity: tfprotov6.DiagnosticSeverityError,
			Summary:  "Unable to Convert State",
			Detail: "An unexpected error was encountered when converting the state to the protocol type. " +
				"This is always an issue in terraform-plugin-framework used to implement the provider and should be reported to the provider developers.\n\n" +
				"Please report this to the provider developer:\n\n" +
				"Unable to create DynamicValue: " + err.Error(),
		})
	} else {
		resp.NewState = &newState
	}
	s.answered.Add(1)
	return resp, nil
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
