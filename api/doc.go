// Package api holds the spec of the last release (openapi.released.yaml) that CI compares
// openapi.yaml with for breaking changes (see CHANGELOG.md): with oasdiff, and for the values
// of a response's open sets (x-extensible-enum), which oasdiff does not compare, with
// TestRemovedEnumValuesAreDeclared.
package api
