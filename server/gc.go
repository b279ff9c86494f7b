package server

import "runtime/debug"

// DefaultGCPercent is the garbage collector's target `renga serve` runs with when GOGC is not
// set: the heap may grow to five times what is live between collections, where Go's default
// (100) lets it grow to twice. The server's live heap is small and it allocates per request, so
// fewer collections leave more CPU to requests for a modest rise in memory (bench/README.md has
// the measurements). GOGC, when set, is the operator's choice and wins (off included).
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
