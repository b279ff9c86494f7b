package shortpath

import (
	"context"
	"maps"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/attr/xattr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// checkedAttribute is an attribute of a schema whose validation the shorter path runs: its
// name, the attribute, and for a single nested attribute its own attributes (by name).
type checkedAttribute struct {
	name   string
	attr   schema.Attribute
	nested []checkedAttribute
}

// newValidateSchema is the attributes of s to check, sorted by name, or nil when the framework
// must validate r's configurations: r has its own ValidateConfig or ConfigValidators (they
// could say anything, and the framework runs them before the attributes' checks), Schema said
// something (the framework repeats it in every answer: schemaOK false), s is deprecated (a
// warning in every answer), or an attribute is of a kind this file does not know (see
// checkedAttributes).
func newValidateSchema(r resource.Resource, s schema.Schema, schemaOK bool) []checkedAttribute {
	if _, ok := r.(resource.ResourceWithValidateConfig); ok {
		return nil
	}
	if _, ok := r.(resource.ResourceWithConfigValidators); ok {
		return nil
	}
	if !schemaOK || s.DeprecationMessage != "" || len(s.Blocks) > 0 {
		return nil
	}
	return checkedAttributes(s.Attributes)
}

// checkedAttributes is attrs to check, or nil when one is of a kind the shorter path does not
// validate (anything but strings, bools, 64-bit integers, sets, lists and maps of them, and
// single nested attributes of those), or is one the framework reports as badly defined
// (neither required, optional nor computed; write-only: not simple anyway).
func checkedAttributes(attrs map[string]schema.Attribute) []checkedAttribute {
	out := make([]checkedAttribute, 0, len(attrs))
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		a := attrs[name]
		if !a.IsRequired() && !a.IsOptional() && !a.IsComputed() || a.IsWriteOnly() {
			return nil
		}
		c := checkedAttribute{name: name, attr: a}
		switch a := a.(type) {
		case schema.StringAttribute, schema.BoolAttribute, schema.Int64Attribute,
			schema.SetAttribute, schema.ListAttribute, schema.MapAttribute:
		case schema.SingleNestedAttribute:
			if c.nested = checkedAttributes(a.Attributes); c.nested == nil {
				return nil
			}
		default:
			return nil
		}
		out = append(out, c)
	}
	return out
}

// ValidateResourceConfig answers, for a simple resource type whose checks the shorter path
// runs (newValidateSchema), only when the framework's answer is empty: the configuration
// decodes, the resource's Configure says nothing, and every check of the framework's
// validation passes without a word (see validConfig). Whenever anything could be said (an
// error, a warning), the whole request goes to the framework, which says it its way, in its
// order.
//
// The framework's steps (proto6server and fwserver.ValidateResourceConfig), and what they
// come to here:
//   - look up the resource type and its schema: the provider's list of resources must say
//     nothing (checked once, with GetMetadata: registered), and the type must be in it;
//     Schema must say nothing (newValidateSchema);
//   - decode the configuration with the schema's type; a null DynamicValue is no
//     configuration (the framework answers nothing; so does this, through the framework);
//   - Configure the resource with the provider's resource data;
//   - the resource's ConfigValidators and ValidateConfig (none: such a type is the
//     framework's);
//   - SchemaValidate: every attribute's checks (validAttribute).
func (s *server) ValidateResourceConfig(ctx context.Context, req *tfprotov6.ValidateResourceConfigRequest) (*tfprotov6.ValidateResourceConfigResponse, error) {
	t := s.fast(ctx, req.TypeName)
	if t == nil || t.check == nil || req.Config == nil || !s.registered(ctx, req.TypeName) {
		return s.frameworkServer.ValidateResourceConfig(ctx, req)
	}
	config, err := req.Config.Unmarshal(t.typ)
	if err != nil || config.IsNull() || !config.IsKnown() {
		// A configuration null or unknown as a whole: Terraform sends neither; the
		// framework reads it its own way.
		return s.frameworkServer.ValidateResourceConfig(ctx, req)
	}
	// The framework configures the resource with its ResourceConfigureData: nil until the
	// provider's Configure gave some, then what it gave, which is what s.data returns (the
	// provider's Configure never defers). Anything Configure says is the framework's to say.
	if !configure(ctx, t.factory(), s.data()) {
		return s.frameworkServer.ValidateResourceConfig(ctx, req)
	}
	var caps validator.ValidateSchemaClientCapabilities
	if req.ClientCapabilities != nil {
		caps.WriteOnlyAttributesAllowed = req.ClientCapabilities.WriteOnlyAttributesAllowed
	}
	if !t.validConfig(ctx, config, caps) {
		return s.frameworkServer.ValidateResourceConfig(ctx, req)
	}
	s.answer(callValidate)
	return &tfprotov6.ValidateResourceConfigResponse{}, nil
}

// registered says whether the framework finds typeName among the provider's resources without
// a word: its lookup (fwserver.Server.Resource) returns whatever it said about the provider's
// list of resources (an empty or duplicate type name), in every answer. GetMetadata says the
// same, and more (data sources, functions); it is asked once.
func (s *server) registered(ctx context.Context, typeName string) bool {
	s.metadataOnce.Do(func() {
		md, err := s.GetMetadata(ctx, &tfprotov6.GetMetadataRequest{}) // the framework's
		if err != nil || md == nil || len(md.Diagnostics) > 0 {
			return
		}
		s.frameworkTypes = map[string]bool{}
		for _, r := range md.Resources {
			s.frameworkTypes[r.TypeName] = true
		}
	})
	return s.frameworkTypes[typeName]
}

// validConfig runs the framework's SchemaValidate over config (known, not null) and says
// whether it would say nothing. Attributes are taken by name (the framework's order is the
// schema map's; it does not matter here: any word at all, and the framework answers).
func (t *resourceType) validConfig(ctx context.Context, config tftypes.Value, caps validator.ValidateSchemaClientCapabilities) bool {
	var attrs map[string]tftypes.Value
	if err := config.As(&attrs); err != nil {
		return false
	}
	cfg := tfsdk.Config{Schema: t.schema, Raw: config}
	for _, c := range t.check {
		if !validAttribute(ctx, c, attrs[c.name], path.Root(c.name), path.MatchRoot(c.name), cfg, caps) {
			return false
		}
	}
	return true
}

// validAttribute is the framework's AttributeValidate of c, whose configuration is tv, at p
// (matched by pe), without a word: true when it would say nothing. Its steps:
//   - the attribute's definition (checked once: checkedAttributes);
//   - the value at p (fwschemadata.Data.ValueAtPath): converted to the attribute's value, then
//     the value's ValidateAttribute or, for the framework's own types, the type's Validate
//     (integers that are not 64-bit integers, sets with duplicate elements, ...);
//   - a computed attribute that is not optional must be null (unknown is not null), a required
//     one must not be null (unknown is not null);
//   - write-only attributes (none: not simple);
//   - the attribute's validators, each called once with the value (null, unknown or known),
//     the path, its expression, the whole configuration and the client's capabilities;
//   - for a single nested attribute known and not null, its object's validators (the same
//     as the attribute's: they run a second time, with the same request), then each of its
//     attributes, the same way, at p.AtName;
//   - a deprecated attribute with a known value that is not null: a warning.
func validAttribute(ctx context.Context, c checkedAttribute, tv tftypes.Value, p path.Path, pe path.Expression, cfg tfsdk.Config, caps validator.ValidateSchemaClientCapabilities) bool {
	a := c.attr
	if tv.Type() == nil {
		// Not in the decoded value: the framework reads it as null; left to it.
		return false
	}
	typ := a.GetType()
	v, err := typ.ValueFromTerraform(ctx, tv)
	if err != nil {
		return false
	}
	if va, ok := v.(xattr.ValidateableAttribute); ok {
		var resp xattr.ValidateAttributeResponse
		va.ValidateAttribute(ctx, xattr.ValidateAttributeRequest{Path: p}, &resp)
		if len(resp.Diagnostics) > 0 {
			return false
		}
	} else if tw, ok := typ.(xattr.TypeWithValidate); ok { //nolint:staticcheck // the framework still calls it
		if len(tw.Validate(ctx, tv, p)) > 0 {
			return false
		}
	}
	null, unknown := v.IsNull(), v.IsUnknown()
	if a.IsComputed() && !a.IsOptional() && !null || a.IsRequired() && null {
		return false
	}
	if !runValidators(ctx, a, v, p, pe, cfg, caps) {
		return false
	}
	if n, ok := a.(schema.SingleNestedAttribute); ok && !null && !unknown {
		if !runObjectValidators(ctx, n.Validators, v, p, pe, cfg, caps) {
			return false
		}
		var attrs map[string]tftypes.Value
		if err := tv.As(&attrs); err != nil {
			return false
		}
		for _, nc := range c.nested {
			if !validAttribute(ctx, nc, attrs[nc.name], p.AtName(nc.name), pe.AtName(nc.name), cfg, caps) {
				return false
			}
		}
	}
	return a.GetDeprecationMessage() == "" || null || unknown
}

// runValidators calls a's validators as AttributeValidate does (by the kind of attribute),
// and says whether all of them said nothing.
func runValidators(ctx context.Context, a schema.Attribute, v attr.Value, p path.Path, pe path.Expression, cfg tfsdk.Config, caps validator.ValidateSchemaClientCapabilities) bool {
	switch a := a.(type) {
	case schema.StringAttribute:
		cv, ok := v.(basetypes.StringValue)
		req := validator.StringRequest{ClientCapabilities: caps, Config: cfg, ConfigValue: cv, Path: p, PathExpression: pe}
		return ok && quiet(a.Validators, func(val validator.String) diag.Diagnostics {
			var resp validator.StringResponse
			val.ValidateString(ctx, req, &resp)
			return resp.Diagnostics
		})
	case schema.BoolAttribute:
		cv, ok := v.(basetypes.BoolValue)
		req := validator.BoolRequest{ClientCapabilities: caps, Config: cfg, ConfigValue: cv, Path: p, PathExpression: pe}
		return ok && quiet(a.Validators, func(val validator.Bool) diag.Diagnostics {
			var resp validator.BoolResponse
			val.ValidateBool(ctx, req, &resp)
			return resp.Diagnostics
		})
	case schema.Int64Attribute:
		cv, ok := v.(basetypes.Int64Value)
		req := validator.Int64Request{ClientCapabilities: caps, Config: cfg, ConfigValue: cv, Path: p, PathExpression: pe}
		return ok && quiet(a.Validators, func(val validator.Int64) diag.Diagnostics {
			var resp validator.Int64Response
			val.ValidateInt64(ctx, req, &resp)
			return resp.Diagnostics
		})
	case schema.SetAttribute:
		cv, ok := v.(basetypes.SetValue)
		req := validator.SetRequest{ClientCapabilities: caps, Config: cfg, ConfigValue: cv, Path: p, PathExpression: pe}
		return ok && quiet(a.Validators, func(val validator.Set) diag.Diagnostics {
			var resp validator.SetResponse
			val.ValidateSet(ctx, req, &resp)
			return resp.Diagnostics
		})
	case schema.ListAttribute:
		cv, ok := v.(basetypes.ListValue)
		req := validator.ListRequest{ClientCapabilities: caps, Config: cfg, ConfigValue: cv, Path: p, PathExpression: pe}
		return ok && quiet(a.Validators, func(val validator.List) diag.Diagnostics {
			var resp validator.ListResponse
			val.ValidateList(ctx, req, &resp)
			return resp.Diagnostics
		})
	case schema.MapAttribute:
		cv, ok := v.(basetypes.MapValue)
		req := validator.MapRequest{ClientCapabilities: caps, Config: cfg, ConfigValue: cv, Path: p, PathExpression: pe}
		return ok && quiet(a.Validators, func(val validator.Map) diag.Diagnostics {
			var resp validator.MapResponse
			val.ValidateMap(ctx, req, &resp)
			return resp.Diagnostics
		})
	case schema.SingleNestedAttribute:
		return runObjectValidators(ctx, a.Validators, v, p, pe, cfg, caps)
	}
	return false
}

func runObjectValidators(ctx context.Context, vals []validator.Object, v attr.Value, p path.Path, pe path.Expression, cfg tfsdk.Config, caps validator.ValidateSchemaClientCapabilities) bool {
	cv, ok := v.(basetypes.ObjectValue)
	req := validator.ObjectRequest{ClientCapabilities: caps, Config: cfg, ConfigValue: cv, Path: p, PathExpression: pe}
	return ok && quiet(vals, func(val validator.Object) diag.Diagnostics {
		var resp validator.ObjectResponse
		val.ValidateObject(ctx, req, &resp)
		return resp.Diagnostics
	})
}

// quiet calls each of vals in order (call runs one) and says whether none said anything; it
// stops at the first that does, as the whole request then goes to the framework.
func quiet[V any](vals []V, call func(V) diag.Diagnostics) bool {
	for _, val := range vals {
		if len(call(val)) > 0 {
			return false
		}
	}
	return true
}
