package server

import (
	"runtime/debug"
	"runtime/metrics"
	"testing"
)

func gcPercent() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestSetGCPercent: without GOGC the process runs at DefaultGCPercent; with it, as GOGC says.
func TestSetGCPercent(t *testing.T) {
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	if SetGCPercent(func(string) string { return "150" }) || gcPercent() != 100 {
		t.Fatalf("GOGC set: the target changed to %d", gcPercent())
	}
	if !SetGCPercent(func(string) string { return "" }) || gcPercent() != DefaultGCPercent {
		t.Fatalf("GOGC unset: target %d, want %d", gcPercent(), DefaultGCPercent)
	}
}
