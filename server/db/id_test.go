package db

import (
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestNewID: a prefix, an underscore and 26 Crockford base32 characters, the first ten the
// time in milliseconds, the rest random; each ID of the process sorts after the one made before
// it, in the same millisecond too (a thousand IDs take far less than a millisecond each); one
// allocation.
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
		if prev != "" && id[4:] <= prev[4:] {
			t.Fatalf("%q does not sort after the earlier %q", id, prev)
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

// TestNewIDConcurrently: IDs made at once by many goroutines are all distinct, and each
// goroutine's sort in the order it made them.
func TestNewIDConcurrently(t *testing.T) {
	const goroutines, each = 8, 2000
	ids := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for range each {
				ids[g] = append(ids[g], NewID("x"))
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for g, list := range ids {
		for i, id := range list {
			if seen[id] {
				t.Fatalf("%q made twice", id)
			}
			seen[id] = true
			if i > 0 && id <= list[i-1] {
				t.Fatalf("goroutine %d: %q does not sort after its previous %q", g, id, list[i-1])
			}
		}
	}
}

// TestMonotonicAfter: an ID of a later millisecond is kept as drawn; one of the same or an
// earlier millisecond (the clock stepped back) is the last plus one, carrying into the high
// bits.
func TestMonotonicAfter(t *testing.T) {
	var m monotonic
	ms := func(v uint64) uint64 { return v << 16 }
	if hi, lo := m.after(ms(5)|7, 9); hi != ms(5)|7 || lo != 9 {
		t.Errorf("first: %x %x", hi, lo)
	}
	if hi, lo := m.after(ms(5)|1, 1); hi != ms(5)|7 || lo != 10 {
		t.Errorf("same millisecond, lower random bits: %x %x, want the last plus one", hi, lo)
	}
	if hi, lo := m.after(ms(4), 100); hi != ms(5)|7 || lo != 11 {
		t.Errorf("an earlier millisecond: %x %x, want the last plus one", hi, lo)
	}
	m.lo = ^uint64(0)
	if hi, lo := m.after(ms(5), 0); hi != ms(5)|8 || lo != 0 {
		t.Errorf("carry: %x %x", hi, lo)
	}
	if hi, lo := m.after(ms(6)|3, 4); hi != ms(6)|3 || lo != 4 {
		t.Errorf("a later millisecond: %x %x, want it as drawn", hi, lo)
	}
}

// TestNewRequestID: NewID's shape with the prefix req, its first ten characters the
// milliseconds of the time given (as NewID writes the clock's), the rest random: a thousand IDs
// of one millisecond all distinct; one allocation.
//
// Fails when: the ID does not carry the request's start time, its random bits are not random,
// or it allocates more than the string.
func TestNewRequestID(t *testing.T) {
	shape := regexp.MustCompile(`^req_[0-9a-hjkmnp-tv-z]{26}$`)
	at := time.Date(2026, 12, 5, 17, 30, 12, 345_678_901, time.UTC)
	want := encodeID("req", uint64(at.UnixMilli())<<16, 0)[:4+10]
	seen := map[string]bool{}
	for range 1000 {
		id := NewRequestID(at)
		if !shape.MatchString(id) {
			t.Fatalf("%q: not req_ and 26 Crockford base32 characters", id)
		}
		if id[:14] != want {
			t.Fatalf("%q: does not start with %s, the milliseconds of %v", id, want, at)
		}
		if seen[id] {
			t.Fatalf("%q made twice", id)
		}
		seen[id] = true
	}
	if later := NewRequestID(at.Add(time.Millisecond)); later[:14] <= want {
		t.Errorf("%q, a millisecond later, does not sort after %s", later, want)
	}
	if n := testing.AllocsPerRun(100, func() { _ = NewRequestID(at) }); n != 1 && !raceDetector {
		t.Errorf("%v allocations per ID, want 1", n)
	}
}
