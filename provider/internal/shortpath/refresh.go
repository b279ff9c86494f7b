package shortpath

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

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
	s.answer(callUpgrade)
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
		diags.Append(t.checkNewState(ctx, readResp.State.Raw)...)
	}
	resp := &tfprotov6.ReadResourceResponse{Diagnostics: protoDiagnostics(ctx, diags)}
	if readResp.Deferred != nil {
		resp.Deferred = &tfprotov6.Deferred{Reason: tfprotov6.DeferredReason(readResp.Deferred.Reason)}
	}
	newState, err := tfprotov6.NewDynamicValue(t.typ, readResp.State.Raw)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, unconvertibleState(err))
	} else {
		resp.NewState = &newState
	}
	s.answer(callRead)
	return resp, nil
}
