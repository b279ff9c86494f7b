package shortpath

import (
	"context"
	"reflect"
	"slices"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/defaults"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// planSchema is what planning needs of a simple schema whose plan the shorter path can work
// out as the framework does (see newPlanSchema): its attributes' defaults, its computed
// attributes without one, and its string attributes' plan modifiers, all at the top level.
type planSchema struct {
	defaults  map[string]func(context.Context, path.Path) (tftypes.Value, diag.Diagnostics)
	computed  []string // computed, without a default; sorted
	modifiers map[string][]planmodifier.String
	modified  []string // the keys of modifiers, sorted
}

// newPlanSchema is s's planSchema, or nil when the framework must plan it. names are s's
// attributes, sorted.
//
// The framework's plan (fwserver.PlanResourceChange) sets defaults where the configuration is
// null, marks computed attributes null in the configuration unknown, runs every attribute's
// plan modifiers, and writes each attribute's value back. The shorter path does the same for
// attributes whose values come back from that round trip unchanged (strings, bools, 64-bit
// integers, collections of them: no floating-point number, whose encoding could change) and
// whose plan modifiers are ones it knows. Defaults, computed attributes and plan modifiers
// are taken at the top level only: a single nested attribute qualifies when neither it nor
// anything in it is computed or has a default or a plan modifier (the framework then writes
// it back as it was).
func newPlanSchema(s schema.Schema, names []string) *planSchema {
	p := &planSchema{
		defaults:  map[string]func(context.Context, path.Path) (tftypes.Value, diag.Diagnostics){},
		modifiers: map[string][]planmodifier.String{},
	}
	for _, name := range names {
		a := s.Attributes[name]
		switch a := a.(type) {
		case schema.StringAttribute:
			for _, m := range a.PlanModifiers {
				if !knownStringModifier(m) {
					return nil
				}
			}
			if len(a.PlanModifiers) > 0 {
				p.modifiers[name] = a.PlanModifiers
				p.modified = append(p.modified, name)
			}
			if a.Default != nil {
				p.defaults[name] = stringDefault(a.Default)
			}
		case schema.BoolAttribute:
			if len(a.PlanModifiers) > 0 {
				return nil
			}
			if a.Default != nil {
				p.defaults[name] = boolDefault(a.Default)
			}
		case schema.Int64Attribute:
			if len(a.PlanModifiers) > 0 {
				return nil
			}
			if a.Default != nil {
				p.defaults[name] = int64Default(a.Default)
			}
		case schema.SetAttribute:
			if len(a.PlanModifiers) > 0 || a.Default != nil || !exactElements(a.ElementType) {
				return nil
			}
		case schema.ListAttribute:
			if len(a.PlanModifiers) > 0 || a.Default != nil || !exactElements(a.ElementType) {
				return nil
			}
		case schema.MapAttribute:
			if len(a.PlanModifiers) > 0 || a.Default != nil || !exactElements(a.ElementType) {
				return nil
			}
		case schema.SingleNestedAttribute:
			if a.Computed || len(a.PlanModifiers) > 0 || a.Default != nil || !plainAttributes(a.Attributes) {
				return nil
			}
			continue
		default:
			return nil
		}
		if a.IsComputed() && p.defaults[name] == nil {
			p.computed = append(p.computed, name)
		}
	}
	return p
}

// plainAttributes says whether attrs (inside a single nested attribute) come back from the
// framework's plan as they went in: nothing computed, no default, no plan modifier, and
// values whose encoding the round trip keeps.
func plainAttributes(attrs map[string]schema.Attribute) bool {
	for _, a := range attrs {
		if a.IsComputed() {
			return false
		}
		switch a := a.(type) {
		case schema.StringAttribute:
			if len(a.PlanModifiers) > 0 || a.Default != nil {
				return false
			}
		case schema.BoolAttribute:
			if len(a.PlanModifiers) > 0 || a.Default != nil {
				return false
			}
		case schema.Int64Attribute:
			if len(a.PlanModifiers) > 0 || a.Default != nil {
				return false
			}
		case schema.SetAttribute:
			if len(a.PlanModifiers) > 0 || a.Default != nil || !exactElements(a.ElementType) {
				return false
			}
		case schema.ListAttribute:
			if len(a.PlanModifiers) > 0 || a.Default != nil || !exactElements(a.ElementType) {
				return false
			}
		case schema.MapAttribute:
			if len(a.PlanModifiers) > 0 || a.Default != nil || !exactElements(a.ElementType) {
				return false
			}
		case schema.SingleNestedAttribute:
			if len(a.PlanModifiers) > 0 || a.Default != nil || !plainAttributes(a.Attributes) {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// exactElements says whether a collection of elem comes back from the framework's values as it
// went in: strings, bools and 64-bit integers.
func exactElements(elem any) bool {
	switch elem.(type) {
	case basetypes.StringType, basetypes.BoolType, basetypes.Int64Type:
		return true
	}
	return false
}

// The framework's string plan modifiers the shorter path runs: UseStateForUnknown,
// UseNonNullStateForUnknown and RequiresReplace, none of which touches private state (the
// shorter path has none to give them). RequiresReplaceIf shares RequiresReplace's type but
// runs any function, which gets the request and its private state: RequiresReplace is told
// apart by its descriptions (its function cannot be: inlining copies it), and a
// RequiresReplaceIf is left to the framework.
var (
	useStateForUnknown        = reflect.TypeOf(stringplanmodifier.UseStateForUnknown())
	useNonNullStateForUnknown = reflect.TypeOf(stringplanmodifier.UseNonNullStateForUnknown())
	requiresReplace           = stringplanmodifier.RequiresReplace()
)

func knownStringModifier(m planmodifier.String) bool {
	ctx := context.Background()
	switch reflect.TypeOf(m) {
	case useStateForUnknown, useNonNullStateForUnknown:
		return true
	case reflect.TypeOf(requiresReplace):
		return m.Description(ctx) == requiresReplace.Description(ctx) && m.MarkdownDescription(ctx) == requiresReplace.MarkdownDescription(ctx)
	}
	return false
}

// The framework's defaults (fwschemadata.Data.TransformDefaults), by kind.

func boolDefault(d defaults.Bool) func(context.Context, path.Path) (tftypes.Value, diag.Diagnostics) {
	return func(ctx context.Context, p path.Path) (tftypes.Value, diag.Diagnostics) {
		var resp defaults.BoolResponse
		d.DefaultBool(ctx, defaults.BoolRequest{Path: p}, &resp)
		v, err := resp.PlanValue.ToTerraformValue(ctx)
		return v, errorDiagnostics(resp.Diagnostics, err)
	}
}

func stringDefault(d defaults.String) func(context.Context, path.Path) (tftypes.Value, diag.Diagnostics) {
	return func(ctx context.Context, p path.Path) (tftypes.Value, diag.Diagnostics) {
		var resp defaults.StringResponse
		d.DefaultString(ctx, defaults.StringRequest{Path: p}, &resp)
		v, err := resp.PlanValue.ToTerraformValue(ctx)
		return v, errorDiagnostics(resp.Diagnostics, err)
	}
}

func int64Default(d defaults.Int64) func(context.Context, path.Path) (tftypes.Value, diag.Diagnostics) {
	return func(ctx context.Context, p path.Path) (tftypes.Value, diag.Diagnostics) {
		var resp defaults.Int64Response
		d.DefaultInt64(ctx, defaults.Int64Request{Path: p}, &resp)
		v, err := resp.PlanValue.ToTerraformValue(ctx)
		return v, errorDiagnostics(resp.Diagnostics, err)
	}
}

// errorDiagnostics is diags, with err as one more error (the caller only asks whether there
// are any: a default that says anything is the framework's to report).
func errorDiagnostics(diags diag.Diagnostics, err error) diag.Diagnostics {
	if err != nil {
		diags.AddError("Default value", err.Error())
	}
	return diags
}

// PlanResourceChange plans a change as the framework does, for a resource type whose plan the
// shorter path can work out (planSchema), once the provider is configured, without private
// state or identity; anything else, and any case where the framework would say something
// (a diagnostic of Configure, of a default or a plan modifier, a value that does not convert
// to its attribute's type), is the framework's.
//
// The framework's steps (fwserver.PlanResourceChange), and what they come to here:
//   - Configure the resource (its diagnostics are part of the answer: any, and the framework
//     answers);
//   - on a destroy (a null proposed state), nothing else: the plan is null;
//   - set defaults where the configuration is null (TransformDefaults);
//   - null write-only attributes (there are none);
//   - when the plan differs from the prior state, mark computed attributes that are null in
//     the configuration and have no default unknown (MarkComputedNilsAsUnknown);
//   - run the attributes' plan modifiers (SchemaModifyPlan): each attribute's configuration,
//     plan and state converted to the attribute's value, its modifiers called in order, their
//     plan values chained, and the paths they say require replacement collected; nested
//     attributes have none, and come back unchanged;
//   - the resource's ModifyPlan (none: such a resource is the framework's, see simple);
//   - sort the paths that require replacement, without duplicates.
func (s *server) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	t := s.fast(ctx, req.TypeName)
	if t == nil || t.plan == nil || len(req.PriorPrivate) > 0 || req.PriorIdentity != nil {
		return s.frameworkServer.PlanResourceChange(ctx, req)
	}
	data := s.data()
	if data == nil {
		return s.frameworkServer.PlanResourceChange(ctx, req)
	}
	config, ok1 := t.decode(req.Config)
	prior, ok2 := t.decode(req.PriorState)
	proposed, ok3 := t.decode(req.ProposedNewState)
	if !ok1 || !ok2 || !ok3 || !prior.IsKnown() || !proposed.IsKnown() {
		return s.frameworkServer.PlanResourceChange(ctx, req)
	}
	// A configuration that is null or unknown as a whole is read differently by the
	// framework's steps (defaults see null attributes in it, the unknown marking does not):
	// the framework's. Terraform sends neither.
	if !proposed.IsNull() && (config.IsNull() || !config.IsKnown()) {
		return s.frameworkServer.PlanResourceChange(ctx, req)
	}
	r := t.factory()
	if !configure(ctx, r, data) {
		return s.frameworkServer.PlanResourceChange(ctx, req)
	}
	planned, replace, ok := t.planChange(ctx, config, prior, proposed)
	if !ok {
		return s.frameworkServer.PlanResourceChange(ctx, req)
	}
	resp := &tfprotov6.PlanResourceChangeResponse{}
	dv, err := tfprotov6.NewDynamicValue(t.typ, planned)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, unconvertibleState(err))
	} else {
		resp.PlannedState = &dv
	}
	if replace != nil {
		resp.RequiresReplace = make([]*tftypes.AttributePath, 0, len(replace))
		for _, p := range replace {
			ap, err := attributePath(ctx, p)
			if err != nil {
				// Attribute names always convert; the framework would say so its way.
				return s.frameworkServer.PlanResourceChange(ctx, req)
			}
			resp.RequiresReplace = append(resp.RequiresReplace, ap)
		}
	}
	s.answer(callPlan)
	return resp, nil
}

// planChange is the planned state and the paths that require replacement, as the framework
// works them out (PlanResourceChange's doc), or ok false where the framework would say
// something.
func (t *resourceType) planChange(ctx context.Context, config, prior, proposed tftypes.Value) (planned tftypes.Value, replace path.Paths, ok bool) {
	if proposed.IsNull() {
		return proposed, nil, true
	}
	var configAttrs, attrs map[string]tftypes.Value
	if err := config.As(&configAttrs); err != nil {
		return tftypes.Value{}, nil, false
	}
	var proposedAttrs map[string]tftypes.Value
	if err := proposed.As(&proposedAttrs); err != nil {
		return tftypes.Value{}, nil, false
	}
	attrs = make(map[string]tftypes.Value, len(proposedAttrs))
	for name, v := range proposedAttrs {
		attrs[name] = v
	}
	for _, name := range t.names {
		def := t.plan.defaults[name]
		if def == nil || !configAttrs[name].IsNull() {
			continue
		}
		v, diags := def(ctx, path.Root(name))
		if len(diags) > 0 {
			return tftypes.Value{}, nil, false
		}
		attrs[name] = v
	}
	planned = tftypes.NewValue(t.typ, attrs)
	if !planned.Equal(prior) {
		for _, name := range t.plan.computed {
			if configAttrs[name].IsNull() {
				attrs[name] = tftypes.NewValue(attrs[name].Type(), tftypes.UnknownValue)
			}
		}
		planned = tftypes.NewValue(t.typ, attrs)
	}
	// The framework reads every attribute of the configuration, the plan and the prior state
	// as its attribute's value to run plan modifiers; one that does not convert is an error
	// (the framework's to report).
	for _, v := range []tftypes.Value{config, planned, prior} {
		if _, err := t.unconvertible(ctx, v); err != nil {
			return tftypes.Value{}, nil, false
		}
	}
	var priorAttrs map[string]tftypes.Value
	if !prior.IsNull() {
		if err := prior.As(&priorAttrs); err != nil {
			return tftypes.Value{}, nil, false
		}
	}
	cfg := tfsdk.Config{Schema: t.schema, Raw: config}
	plan := tfsdk.Plan{Schema: t.schema, Raw: planned}
	state := tfsdk.State{Schema: t.schema, Raw: prior}
	for _, name := range t.plan.modified {
		p := path.Root(name)
		req := planmodifier.StringRequest{
			Config:      cfg,
			ConfigValue: stringValue(configAttrs[name]),
			Path:        p,
			Plan:        plan,
			PlanValue:   stringValue(attrs[name]),
			State:       state,
			StateValue:  stringValue(priorAttrs[name]),
		}
		for _, m := range t.plan.modifiers[name] {
			resp := &planmodifier.StringResponse{PlanValue: req.PlanValue}
			m.PlanModifyString(ctx, req, resp)
			if len(resp.Diagnostics) > 0 {
				return tftypes.Value{}, nil, false
			}
			req.PlanValue = resp.PlanValue
			if resp.RequiresReplace {
				replace.Append(p)
			}
		}
		v, err := req.PlanValue.ToTerraformValue(ctx)
		if err != nil {
			return tftypes.Value{}, nil, false
		}
		attrs[name] = v
	}
	return tftypes.NewValue(t.typ, attrs), normalisedPaths(replace), true
}

// stringValue is v (of a string attribute, converted before: see unconvertible) as the
// framework's value; the zero Value (an attribute of a null object) is null.
func stringValue(v tftypes.Value) types.String {
	switch {
	case v.Type() == nil || v.IsNull():
		return types.StringNull()
	case !v.IsKnown():
		return types.StringUnknown()
	}
	var s string
	_ = v.As(&s)
	return types.StringValue(s)
}

// normalisedPaths is the framework's NormaliseRequiresReplace: sorted by their text, without
// duplicates.
func normalisedPaths(ps path.Paths) path.Paths {
	if len(ps) < 2 {
		return ps
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].String() < ps[j].String() })
	out := path.Paths{ps[0]}
	for _, p := range ps[1:] {
		if !p.Equal(out[len(out)-1]) {
			out = append(out, p)
		}
	}
	return slices.Clip(out)
}

// decode is dv as a value of the schema's type, null when Terraform sent none; ok false when
// it does not decode (the framework's to report).
func (t *resourceType) decode(dv *tfprotov6.DynamicValue) (tftypes.Value, bool) {
	if dv == nil {
		return tftypes.NewValue(t.typ, nil), true
	}
	v, err := dv.Unmarshal(t.typ)
	return v, err == nil
}

// configure calls r's Configure with data as the framework does; false when it said anything
// (the framework's answer then has what it said, its way).
func configure(ctx context.Context, r resource.Resource, data any) bool {
	rc, ok := r.(resource.ResourceWithConfigure)
	if !ok {
		return true
	}
	var resp resource.ConfigureResponse
	rc.Configure(ctx, resource.ConfigureRequest{ProviderData: data}, &resp)
	return len(resp.Diagnostics) == 0
}
