package shortpath_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	fwprovider "github.com/hashicorp/terraform-plugin-framework/provider"
	providerschema "github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"renga.dev/renga/provider/internal/shortpath"
)

// calls records every validator call: its kind, path, path expression, value, whole
// configuration and capabilities. A validator says something of a value "bad" or 13.
type calls struct {
	mu  sync.Mutex
	log []string
}

func (c *calls) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.log
	c.log = nil
	slices.Sort(out)
	return out
}

type validatorRecorder struct {
	c    *calls
	name string
}

func (r validatorRecorder) Description(context.Context) string         { return r.name }
func (r validatorRecorder) MarkdownDescription(context.Context) string { return r.name }

func (r validatorRecorder) record(kind string, v fmt.Stringer, p fmt.Stringer, pe fmt.Stringer, cfg tftypes.Value, caps validator.ValidateSchemaClientCapabilities) {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	r.c.log = append(r.c.log, fmt.Sprintf("%s %s path=%s expr=%s value=%s config=%s caps=%v", r.name, kind, p, pe, v, cfg, caps))
}

func (r validatorRecorder) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	r.record("string", req.ConfigValue, req.Path, req.PathExpression, req.Config.Raw, req.ClientCapabilities)
	if req.ConfigValue.ValueString() == "bad" {
		resp.Diagnostics.AddAttributeError(req.Path, "Bad", r.name)
	}
}

func (r validatorRecorder) ValidateInt64(_ context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	r.record("int64", req.ConfigValue, req.Path, req.PathExpression, req.Config.Raw, req.ClientCapabilities)
	if req.ConfigValue.ValueInt64() == 13 {
		resp.Diagnostics.AddAttributeWarning(req.Path, "Unlucky", r.name)
	}
}

func (r validatorRecorder) ValidateObject(_ context.Context, req validator.ObjectRequest, resp *validator.ObjectResponse) {
	r.record("object", req.ConfigValue, req.Path, req.PathExpression, req.Config.Raw, req.ClientCapabilities)
	if v, ok := req.ConfigValue.Attributes()["s"].(types.String); ok && v.ValueString() == "bad" {
		resp.Diagnostics.AddAttributeError(req.Path, "Bad object", r.name)
	}
}

func (r validatorRecorder) ValidateList(_ context.Context, req validator.ListRequest, _ *validator.ListResponse) {
	r.record("list", req.ConfigValue, req.Path, req.PathExpression, req.Config.Raw, req.ClientCapabilities)
}

func (r validatorRecorder) ValidateMap(_ context.Context, req validator.MapRequest, _ *validator.MapResponse) {
	r.record("map", req.ConfigValue, req.Path, req.PathExpression, req.Config.Raw, req.ClientCapabilities)
}

func (r validatorRecorder) ValidateBool(_ context.Context, req validator.BoolRequest, _ *validator.BoolResponse) {
	r.record("bool", req.ConfigValue, req.Path, req.PathExpression, req.Config.Raw, req.ClientCapabilities)
}

// fakeProvider serves resources made up for this test; what its Configure gives resources is
// its configuration's mode.
type fakeProvider struct {
	c    *calls
	mu   sync.Mutex
	data any
}

func (p *fakeProvider) resourceData() any {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.data
}

func (p *fakeProvider) Metadata(_ context.Context, _ fwprovider.MetadataRequest, resp *fwprovider.MetadataResponse) {
	resp.TypeName = "fake"
}

func (p *fakeProvider) Schema(_ context.Context, _ fwprovider.SchemaRequest, resp *fwprovider.SchemaResponse) {
	resp.Schema.Attributes = map[string]providerschema.Attribute{"mode": providerschema.StringAttribute{Optional: true}}
}

func (p *fakeProvider) Configure(ctx context.Context, req fwprovider.ConfigureRequest, resp *fwprovider.ConfigureResponse) {
	var mode types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("mode"), &mode)...)
	resp.ResourceData = mode.ValueString()
	p.mu.Lock()
	p.data = resp.ResourceData
	p.mu.Unlock()
}

func (p *fakeProvider) Resources(context.Context) []func() resource.Resource { return p.resources() }

func (p *fakeProvider) resources() []func() resource.Resource {
	return []func() resource.Resource{
		func() resource.Resource { return &fakeResource{c: p.c, name: "thing"} },
		func() resource.Resource { return &fakeResource{c: p.c, name: "deprecated", deprecated: true} },
		func() resource.Resource { return &fakeResource{c: p.c, name: "warned", warned: true} },
		func() resource.Resource { return &validatedResource{fakeResource{c: p.c, name: "validated"}} },
	}
}

func (p *fakeProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }

type fakeResource struct {
	c                  *calls
	name               string
	deprecated, warned bool
}

func (r *fakeResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_" + r.name
}

func (r *fakeResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	rec := func(name string) validatorRecorder { return validatorRecorder{c: r.c, name: name} }
	resp.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"name":     schema.StringAttribute{Required: true, Validators: []validator.String{rec("name")}},
		"computed": schema.StringAttribute{Computed: true, Validators: []validator.String{rec("computed")}},
		"either":   schema.BoolAttribute{Optional: true, Computed: true, Validators: []validator.Bool{rec("either")}},
		"old":      schema.StringAttribute{Optional: true, DeprecationMessage: "old is old", Validators: []validator.String{rec("old")}},
		"tags":     schema.ListAttribute{Optional: true, ElementType: types.Int64Type, Validators: []validator.List{rec("tags")}},
		"flags":    schema.MapAttribute{Optional: true, ElementType: types.BoolType, Validators: []validator.Map{rec("flags")}},
		"obj": schema.SingleNestedAttribute{Optional: true, Validators: []validator.Object{rec("obj"), rec("obj2")}, Attributes: map[string]schema.Attribute{
			"n": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{rec("obj.n")}},
			"s": schema.StringAttribute{Optional: true, Validators: []validator.String{rec("obj.s")}},
			"inner": schema.SingleNestedAttribute{Optional: true, Validators: []validator.Object{rec("obj.inner")}, Attributes: map[string]schema.Attribute{
				"s":   schema.StringAttribute{Optional: true, Validators: []validator.String{rec("obj.inner.s")}},
				"old": schema.BoolAttribute{Optional: true, DeprecationMessage: "inner old is old"},
			}},
		}},
	}}
	if r.deprecated {
		resp.Schema.DeprecationMessage = "the whole resource is old"
	}
	if r.warned {
		resp.Diagnostics.AddWarning("Schema warning", "the schema says so")
	}
}

func (r *fakeResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	switch req.ProviderData {
	case "error":
		resp.Diagnostics.AddError("Configure error", "configured badly")
	case "warning":
		resp.Diagnostics.AddWarning("Configure warning", "configured oddly")
	}
}

func (r *fakeResource) Create(context.Context, resource.CreateRequest, *resource.CreateResponse) {}
func (r *fakeResource) Read(context.Context, resource.ReadRequest, *resource.ReadResponse)       {}
func (r *fakeResource) Update(context.Context, resource.UpdateRequest, *resource.UpdateResponse) {}
func (r *fakeResource) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}

// validatedResource has a ValidateConfig of its own, which says nothing: the framework's all
// the same (it could say anything).
type validatedResource struct{ fakeResource }

func (r *validatedResource) ValidateConfig(context.Context, resource.ValidateConfigRequest, *resource.ValidateConfigResponse) {
}

// TestValidationCalls: on resources made up to have what the Renga ones do not (validators of
// every kind the shorter path runs, on attributes at the top level and in nested attributes two
// deep; object validators; deprecated attributes; a computed attribute with a validator; a
// deprecated schema; a schema that warns; a resource with its own ValidateConfig; a resource
// Configure that warns or fails), the shorter path calls the same validators as many times as
// the framework, with the same requests (value, path, path expression, whole configuration,
// capabilities), answers the same, and answers itself exactly when the framework says nothing.
//
// Fails when: a validator is called differently (more, less, other requests), or an answer
// differs.
func TestValidationCalls(t *testing.T) {
	ctx := context.Background()
	c := &calls{}
	newServers := func(mode string) (framework, wrapped tfprotov6.ProviderServer) {
		fp := &fakeProvider{c: c}
		framework = providerserver.NewProtocol6(&fakeProvider{c: c})()
		wrapped = shortpath.Wrap(providerserver.NewProtocol6(fp)(), "fake", fp.resourceData, fp.resources()...)
		if mode == "" {
			return framework, wrapped
		}
		for _, s := range []tfprotov6.ProviderServer{framework, wrapped} {
			schemas, err := s.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
			if err != nil {
				t.Fatal(err)
			}
			pt := schemas.Provider.ValueType()
			cfg, err := tfprotov6.NewDynamicValue(pt, tftypes.NewValue(pt, map[string]tftypes.Value{"mode": str(mode)}))
			if err != nil {
				t.Fatal(err)
			}
			if resp, err := s.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{Config: &cfg}); err != nil || len(resp.Diagnostics) > 0 {
				t.Fatal(err, describe(resp))
			}
		}
		return framework, wrapped
	}
	framework, _ := newServers("")
	schemas, err := framework.GetProviderSchema(ctx, &tfprotov6.GetProviderSchemaRequest{})
	if err != nil || len(schemas.Diagnostics) != 1 { // fake_warned's schema warns
		t.Fatal(err, describe(schemas.Diagnostics))
	}
	objectType := func(typ tftypes.Type) tftypes.Object {
		o, ok := typ.(tftypes.Object)
		if !ok {
			t.Fatalf("%s: not an object", typ)
		}
		return o
	}
	typ := objectType(schemas.ResourceSchemas["fake_thing"].ValueType())
	objType := objectType(typ.AttributeTypes["obj"])
	innerType := objectType(objType.AttributeTypes["inner"])
	tags := tftypes.List{ElementType: tftypes.Number}
	flags := tftypes.Map{ElementType: tftypes.Bool}
	cfg := func(attrs map[string]tftypes.Value) tftypes.Value {
		if _, ok := attrs["name"]; !ok {
			attrs["name"] = str("x")
		}
		return object(t, typ, attrs)
	}
	obj := func(attrs map[string]tftypes.Value) tftypes.Value { return object(t, objType, attrs) }
	inner := func(attrs map[string]tftypes.Value) tftypes.Value { return object(t, innerType, attrs) }

	configs := []struct {
		what   string
		config tftypes.Value
		valid  bool
	}{
		{"name only", cfg(map[string]tftypes.Value{}), true},
		{"name unknown", cfg(map[string]tftypes.Value{"name": unknownString}), true},
		{"name missing", cfg(map[string]tftypes.Value{"name": tftypes.NewValue(tftypes.String, nil)}), false},
		{"name bad", cfg(map[string]tftypes.Value{"name": str("bad")}), false},
		{"computed set", cfg(map[string]tftypes.Value{"computed": str("y")}), false},
		{"computed unknown", cfg(map[string]tftypes.Value{"computed": unknownString}), false},
		{"optional computed set", cfg(map[string]tftypes.Value{"either": boolean(true)}), true},
		{"deprecated set", cfg(map[string]tftypes.Value{"old": str("y")}), false},
		{"deprecated unknown", cfg(map[string]tftypes.Value{"old": unknownString}), true},
		{"list and map", cfg(map[string]tftypes.Value{"tags": tftypes.NewValue(tags, []tftypes.Value{num(1), num(1), unknownNumber}),
			"flags": tftypes.NewValue(flags, map[string]tftypes.Value{"a": boolean(true), "b": unknownBool})}), true},
		{"list element not an integer", cfg(map[string]tftypes.Value{"tags": tftypes.NewValue(tags, []tftypes.Value{tftypes.NewValue(tftypes.Number, 1.5)})}), false},
		{"list unknown", cfg(map[string]tftypes.Value{"tags": tftypes.NewValue(tags, tftypes.UnknownValue), "flags": tftypes.NewValue(flags, tftypes.UnknownValue)}), true},
		{"object unknown", cfg(map[string]tftypes.Value{"obj": tftypes.NewValue(objType, tftypes.UnknownValue)}), true},
		{"object empty", cfg(map[string]tftypes.Value{"obj": obj(nil)}), true},
		{"object full", cfg(map[string]tftypes.Value{"obj": obj(map[string]tftypes.Value{"n": num(2), "s": str("s"),
			"inner": inner(map[string]tftypes.Value{"s": str("t")})})}), true},
		{"inner unknown", cfg(map[string]tftypes.Value{"obj": obj(map[string]tftypes.Value{"n": unknownNumber, "inner": tftypes.NewValue(innerType, tftypes.UnknownValue)})}), true},
		{"object says bad", cfg(map[string]tftypes.Value{"obj": obj(map[string]tftypes.Value{"s": str("bad")})}), false},
		{"nested warns", cfg(map[string]tftypes.Value{"obj": obj(map[string]tftypes.Value{"n": num(13)})}), false},
		{"nested not an integer", cfg(map[string]tftypes.Value{"obj": obj(map[string]tftypes.Value{"n": tftypes.NewValue(tftypes.Number, 2.5)})}), false},
		{"two deep says bad", cfg(map[string]tftypes.Value{"obj": obj(map[string]tftypes.Value{"inner": inner(map[string]tftypes.Value{"s": str("bad")})})}), false},
		{"two deep deprecated", cfg(map[string]tftypes.Value{"obj": obj(map[string]tftypes.Value{"inner": inner(map[string]tftypes.Value{"old": boolean(false)})})}), false},
		{"two deep deprecated unknown", cfg(map[string]tftypes.Value{"obj": obj(map[string]tftypes.Value{"inner": inner(map[string]tftypes.Value{"old": unknownBool})})}), true},
	}
	compared := 0
	for _, mode := range []string{"", "fine", "warning", "error"} {
		framework, wrapped := newServers(mode)
		c.take()
		for _, typeName := range []string{"fake_thing", "fake_deprecated", "fake_warned", "fake_validated"} {
			for _, caps := range []*tfprotov6.ValidateResourceConfigClientCapabilities{nil, {WriteOnlyAttributesAllowed: true}} {
				for _, k := range configs {
					what := fmt.Sprintf("mode %q: %s: %s (caps %v)", mode, typeName, k.what, caps)
					dv, err := tfprotov6.NewDynamicValue(typ, k.config)
					if err != nil {
						t.Fatal(err)
					}
					req := func() *tfprotov6.ValidateResourceConfigRequest {
						d := dv
						return &tfprotov6.ValidateResourceConfigRequest{TypeName: typeName, Config: &d, ClientCapabilities: caps}
					}
					fr, err := framework.ValidateResourceConfig(ctx, req())
					if err != nil {
						t.Fatal(err)
					}
					frameworkCalls := c.take()
					before := shortpath.AnsweredCalls(wrapped, "ValidateResourceConfig")
					wr, err := wrapped.ValidateResourceConfig(ctx, req())
					if err != nil {
						t.Fatal(err)
					}
					answered := shortpath.AnsweredCalls(wrapped, "ValidateResourceConfig") > before
					wrappedCalls := c.take()
					canonical(fr)
					canonical(wr)
					if describe(fr) != describe(wr) {
						t.Errorf("%s:\nframework: %s\nwrapped:   %s", what, describe(fr), describe(wr))
					}
					// fake_validated's own ValidateConfig says nothing, but could: the
					// framework's, valid or not. fake_warned's schema warning is in the
					// framework's first answer only (it caches the schema, not what Schema
					// said): the framework's too.
					empty := len(fr.Diagnostics) == 0
					if typeName != "fake_warned" {
						wantEmpty := k.valid && (typeName == "fake_thing" || typeName == "fake_validated") && mode != "warning" && mode != "error"
						if empty != wantEmpty {
							t.Errorf("%s: valid %v, the framework says otherwise: %s", what, wantEmpty, describe(fr))
						}
					}
					if wantAnswer := empty && typeName == "fake_thing"; answered != wantAnswer {
						t.Errorf("%s: the shorter path answered: %v, want %v (%s)", what, answered, wantAnswer, describe(fr))
					}
					if answered && len(frameworkCalls) > 0 {
						compared++
					}
					if answered && !slices.Equal(frameworkCalls, wrappedCalls) {
						t.Errorf("%s: validator calls differ:\nframework:\n  %s\nwrapped:\n  %s", what,
							strings.Join(frameworkCalls, "\n  "), strings.Join(wrappedCalls, "\n  "))
					}
				}
			}
		}
	}
	if compared < 40 {
		t.Errorf("validator calls compared on %d answers only", compared)
	}
}
