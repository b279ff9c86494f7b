package db

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestNewID: a prefix, an underscore and 26 Crockford base32 characters, the first ten the
// time in milliseconds (IDs made later sort after), the rest random; one allocation.
func TestNewID(t *testing.T) {
	shape := regexp.MustCompile(`^req_[0-9a-hjkmnp-tv-z]{26}$`)
	seen := map[string]bool{}
	prev := ""
	for range 1000 {
		id := NewID("req")
		if !shape.MatchString(id) {
			t.Fatalf("%q: not req_ and 26 Crockford base32 characters", id)
		}
		if seen[id] {
			t.Fatalf("%q made twice", id)
		}
		seen[id] = true
		if prev != "" && id[:14] < prev[:14] {
			t.Fatalf("%q sorts before the earlier %q", id, prev)
		}
		prev = id
	}
	before := NewID("x")
	time.Sleep(2 * time.Millisecond)
	if after := NewID("x"); after <= before {
		t.Errorf("%q made 2 ms after %q sorts before it", after, before)
	}
	long := strings.Repeat("p", 100)
	if id := NewID(long); !strings.HasPrefix(id, long+"_") || len(id) != len(long)+27 {
		t.Errorf("a long prefix: %q", id)
	}
	if n := testing.AllocsPerRun(100, func() { _ = NewID("req") }); n != 1 && !raceDetector {
		t.Errorf("%v allocations per ID, want 1", n)
	}
}
