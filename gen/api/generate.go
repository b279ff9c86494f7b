// Package api is generated from openapi.yaml: the strict server interface, its models and the embedded spec.
package api

//go:generate go tool oapi-codegen -config cfg.yaml ../../openapi.yaml
