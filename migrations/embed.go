// Package migrations holds the SQL migrations of the deployment's schema, applied by goose.
package migrations

import "embed"

// FS is the set of numbered SQL migrations.
//
//go:embed *.sql
var FS embed.FS
