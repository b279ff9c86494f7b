// Package shortpath serves the calls Terraform makes for each resource it refreshes
// (UpgradeResourceState, ReadResource), plans (PlanResourceChange) and applies
// (ApplyResourceChange), and validates (ValidateResourceConfig, valid configurations only),
// for simple resources, without the framework's generic passes over their values, and leaves
// every other call, and every case it does not cover, to the framework's server.
//
// In a refresh-only plan of examples/scale (bench/terraform_load_test.go), UpgradeResourceState
// and ReadResource were nearly all the provider did, and most of their CPU was the
// framework's, not the resources': for each state it walks every null attribute looking up its
// schema (to turn null blocks into empty ones), converts the old and the new state to its
// attribute values by path (for custom types' semantic equality), walks the state again for
// write-only attributes, and sets up its loggers. In an apply, PlanResourceChange and
// ApplyResourceChange are the same story: the plan walks the proposed state by path three
// times (defaults, write-only attributes, computed attributes to mark unknown), then converts
// every attribute of the configuration, the plan and the prior state to run plan modifiers and
// writes each back by path.
//
// For a resource with no blocks, no write-only attributes, no custom types and no identity
// (simple), these passes change nothing, and can only fail where a value does not convert to
// its attribute's type; what is left is what this package does: JSON or msgpack to a value of
// the schema's type, that conversion check, the resource's own Configure, Read, Create, Update
// or Delete, the plan's defaults, unknown marking and plan modifiers where the schema has them
// (at the top level, of kinds this package knows: planSchema), and the value back to msgpack,
// with the same functions the framework calls. Where the framework would say anything of its
// own (a diagnostic of Configure, a default or a plan modifier; a value that does not convert),
// or where there is private state, identity or an unconfigured provider, the call goes to the
// framework. Validation answers only when the framework would say nothing at all: it runs the
// framework's checks and the attributes' validators as the framework calls them, and any
// word from any of them sends the whole request to the framework (validate.go).
// TestSameAnswers, TestSamePlansAndApplies and TestSameValidation hold the two paths to the
// same responses, byte for byte, against a real server; TestValidationCalls holds validators
// to the same calls. (The framework's trace logs of these
// calls, TF_LOG_SDK_FRAMEWORK=trace, are not written for the calls answered here.)
package shortpath
