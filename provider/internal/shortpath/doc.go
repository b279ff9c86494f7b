// Package shortpath serves the two calls Terraform makes for each resource it refreshes,
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
package shortpath
