package shortpath

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// ApplyResourceChange applies a change as the framework does (fwserver.ApplyResourceChange and
// its CreateResource, UpdateResource, DeleteResource), for a simple resource once the provider
// is configured, without private state or identity; anything else is the framework's, and so
// is any case where the framework would say something before the resource's own Create,
// Update or Delete (a diagnostic of Configure, a planned state that does not convert to its
// attributes' values).
//
// What is left of the framework's steps for a simple resource:
//   - Configure the resource;
//   - a null prior state is a create: Create, from a null state; after it, without errors, a
//     null state is an error ("Missing Resource State After Create");
//   - else a null planned state is a delete: Delete, from the prior state; without errors,
//     the new state is null;
//   - else an update: Update, from the prior state; after it, without errors, a null state is
//     an error ("Missing Resource State After Update");
//   - after a create or an update without errors, the new state's attributes converted to their
//     values (semantic equality, nothing to do for the framework's own types: see
//     checkNewState);
//   - the new state as it is after an error (a partial state from Create, the prior state
//     or what Update or Delete left), and the diagnostics of Create, Update or Delete.
//
// Create, Update and Delete get no private state (nil; the framework gives an empty one): a
// resource that reads or writes it must leave this path (Wrap's list). Neither Renga resource
// does. With none written, the framework's answer has no private state either.
func (s *server) ApplyResourceChange(ctx context.Context, req *tfprotov6.ApplyResourceChangeRequest) (*tfprotov6.ApplyResourceChangeResponse, error) {
	t := s.fast(ctx, req.TypeName)
	if t == nil || len(req.PlannedPrivate) > 0 || req.PlannedIdentity != nil {
		return s.frameworkServer.ApplyResourceChange(ctx, req)
	}
	data := s.data()
	if data == nil {
		return s.frameworkServer.ApplyResourceChange(ctx, req)
	}
	config, ok1 := t.decode(req.Config)
	prior, ok2 := t.decode(req.PriorState)
	planned, ok3 := t.decode(req.PlannedState)
	if !ok1 || !ok2 || !ok3 || !prior.IsKnown() || !planned.IsKnown() || (prior.IsNull() && planned.IsNull()) {
		return s.frameworkServer.ApplyResourceChange(ctx, req)
	}
	destroy := !prior.IsNull() && planned.IsNull()
	if !destroy {
		// After a create or an update, the framework converts the planned state's attributes
		// to their values (the prior half of semantic equality); one that does not convert is
		// an error the framework reports.
		if _, err := t.unconvertible(ctx, planned); err != nil {
			return s.frameworkServer.ApplyResourceChange(ctx, req)
		}
	}
	r := t.factory()
	if !configure(ctx, r, data) {
		return s.frameworkServer.ApplyResourceChange(ctx, req)
	}

	var newState tftypes.Value
	var diags diag.Diagnostics
	switch {
	case prior.IsNull():
		newState, diags = t.create(ctx, r, config, planned)
	case destroy:
		newState, diags = t.delete(ctx, r, prior)
	default:
		newState, diags = t.update(ctx, r, config, planned, prior)
	}

	resp := &tfprotov6.ApplyResourceChangeResponse{Diagnostics: protoDiagnostics(ctx, diags)}
	dv, err := tfprotov6.NewDynamicValue(t.typ, newState)
	if err != nil {
		resp.Diagnostics = append(resp.Diagnostics, unconvertibleState(err))
	} else {
		resp.NewState = &dv
	}
	s.answer(callApply)
	return resp, nil
}

// create is the framework's CreateResource for a simple resource: the new state and the
// diagnostics.
func (t *resourceType) create(ctx context.Context, r resource.Resource, config, planned tftypes.Value) (tftypes.Value, diag.Diagnostics) {
	null := tftypes.NewValue(t.typ, nil)
	req := resource.CreateRequest{
		Config: tfsdk.Config{Schema: t.schema, Raw: config},
		Plan:   tfsdk.Plan{Schema: t.schema, Raw: planned},
	}
	resp := resource.CreateResponse{State: tfsdk.State{Schema: t.schema, Raw: null}}
	r.Create(ctx, req, &resp)
	diags := resp.Diagnostics
	if !diags.HasError() && resp.State.Raw.Equal(null) {
		detail := "The Terraform Provider unexpectedly returned no resource state after having no errors in the resource creation. " +
			"This is always an issue in the Terraform Provider and should be reported to the provider developers.\n\n" +
			"The resource may have been successfully created, but Terraform is not tracking it. " +
			"Applying the configuration again with no other action may result in duplicate resource errors."
		if _, ok := r.(resource.ResourceWithImportState); ok {
			detail += " Import the resource if the resource was actually created and Terraform should be tracking it."
		}
		diags.AddError("Missing Resource State After Create", detail)
	}
	if !diags.HasError() {
		diags.Append(t.checkNewState(ctx, resp.State.Raw)...)
	}
	return resp.State.Raw, diags
}

// update is the framework's UpdateResource for a simple resource.
func (t *resourceType) update(ctx context.Context, r resource.Resource, config, planned, prior tftypes.Value) (tftypes.Value, diag.Diagnostics) {
	null := tftypes.NewValue(t.typ, nil)
	req := resource.UpdateRequest{
		Config: tfsdk.Config{Schema: t.schema, Raw: config},
		Plan:   tfsdk.Plan{Schema: t.schema, Raw: planned},
		State:  tfsdk.State{Schema: t.schema, Raw: prior},
	}
	// The framework starts from the prior state: an Update that sets nothing leaves it.
	resp := resource.UpdateResponse{State: tfsdk.State{Schema: t.schema, Raw: prior}}
	r.Update(ctx, req, &resp)
	diags := resp.Diagnostics
	if !diags.HasError() && resp.State.Raw.Equal(null) {
		diags.AddError("Missing Resource State After Update",
			"The Terraform Provider unexpectedly returned no resource state after having no errors in the resource update. "+
				"This is always an issue in the Terraform Provider and should be reported to the provider developers.")
	}
	if !diags.HasError() {
		diags.Append(t.checkNewState(ctx, resp.State.Raw)...)
	}
	return resp.State.Raw, diags
}

// delete is the framework's DeleteResource for a simple resource.
func (t *resourceType) delete(ctx context.Context, r resource.Resource, prior tftypes.Value) (tftypes.Value, diag.Diagnostics) {
	req := resource.DeleteRequest{State: tfsdk.State{Schema: t.schema, Raw: prior}}
	resp := resource.DeleteResponse{State: tfsdk.State{Schema: t.schema, Raw: prior}}
	r.Delete(ctx, req, &resp)
	if !resp.Diagnostics.HasError() {
		resp.State.RemoveResource(ctx)
	}
	return resp.State.Raw, resp.Diagnostics
}
