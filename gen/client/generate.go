// Package client is the typed client generated from openapi.yaml.
package client

//go:generate go tool oapi-codegen -config cfg.yaml ../../openapi.yaml
