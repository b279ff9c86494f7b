package server

import "runtime/debug"

// DefaultGCPercent is the garbage collector's target `renga serve` runs with when GOGC is not
// set: the heap may grow to five times what is live between collections, where Go's default
// (100) lets it grow to twice. The server's live heap is small (tens of MiB), and it allocates
// per request: at Go's default, collection was a tenth of the server's CPU under load. At 400,
// on two cores shared with PostgreSQL (2026-12-05): an authenticated GET cost the server's
// process 59 µs of CPU against 66-68, and the intake load's maximum rose from 3143 to 3418
// batches/s, its peak RSS (two servers and the load generator in one process) from 48.7 to
// 72.1 MB. GOGC, when set, is the operator's choice and wins (off included).
const DefaultGCPercent = 400

// SetGCPercent sets the process's collector target to DefaultGCPercent, unless getenv (the
// process's environment, which Go's runtime has read) sets GOGC; it reports whether it did.
func SetGCPercent(getenv func(string) string) bool {
	if getenv("GOGC") != "" {
		return false
	}
	debug.SetGCPercent(DefaultGCPercent)
	return true
}
