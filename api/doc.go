// Package api holds the spec of the last release (openapi.released.yaml) that CI compares
// openapi.yaml with for breaking changes (see CHANGELOG.md).
package api
