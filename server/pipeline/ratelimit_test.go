package pipeline

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func TestSourceBucket(t *testing.T) {
	tests := []struct {
		addr string
		want string
	}{
		{"198.51.100.7", "198.51.100.7"},
		{"0.0.0.0", "0.0.0.0"},
		{"2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"},
		{"2001:db8:1:2::", "2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "2001:db8:1:3::/64"},
		{"::1", "::/64"},
		// An IPv4-mapped address is one IPv4 host, not a /64 (the pipeline unmaps sources first).
		{"::ffff:198.51.100.7", "::ffff:198.51.100.7"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			if got := sourceBucket(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Errorf("sourceBucket(%s) = %q, want %q", tt.addr, got, tt.want)
			}
		})
	}
	t.Run("one /64, one bucket", func(t *testing.T) {
		a := sourceBucket(netip.MustParseAddr("2001:db8::1"))
		b := sourceBucket(netip.MustParseAddr("2001:db8::ffff:1"))
		c := sourceBucket(netip.MustParseAddr("2001:db8:0:1::1"))
		if a != b || a == c {
			t.Errorf("buckets %q, %q, %q: want the first two equal, the third apart", a, b, c)
		}
	})
}

func TestLimitersRetryAfter(t *testing.T) {
	tests := []struct {
		rate float64
		want int
	}{
		{0, 1},
		{-1, 1},
		{0.1, 10},
		{0.3, 4},
		{0.5, 2},
		{1, 1},
		{2, 1},
		{100, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.rate), func(t *testing.T) {
			if got := newLimiters(tt.rate, 1).retryAfter(); got != tt.want {
				t.Errorf("retryAfter at %v/s = %d, want %d", tt.rate, got, tt.want)
			}
		})
	}
}

func TestLimitersAllow(t *testing.T) {
	t.Run("zero rate disables", func(t *testing.T) {
		for _, perSecond := range []float64{0, -1} {
			l := newLimiters(perSecond, 0)
			for i := range 1000 {
				if !l.allow("k") {
					t.Fatalf("rate %v: request %d refused", perSecond, i)
				}
			}
			if len(l.m) != 0 {
				t.Errorf("rate %v: %d buckets held, want none", perSecond, len(l.m))
			}
		}
	})
	t.Run("burst then refused", func(t *testing.T) {
		l := newLimiters(0.001, 3) // no refill during the test
		for i := range 3 {
			if !l.allow("a") {
				t.Fatalf("request %d of the burst refused", i+1)
			}
		}
		if l.allow("a") {
			t.Error("request past the burst allowed")
		}
		if l.allow("a") {
			t.Error("second request past the burst allowed")
		}
		if !l.allow("b") {
			t.Error("another key's first request refused")
		}
		if len(l.m) != 2 {
			t.Errorf("%d buckets, want 2", len(l.m))
		}
	})
	t.Run("zero burst refuses all", func(t *testing.T) {
		l := newLimiters(1, 0)
		if l.allow("a") {
			t.Error("allowed with a burst of 0")
		}
	})
	t.Run("a new key past maxLimiters sweeps", func(t *testing.T) {
		l := newLimiters(0.001, 1)
		for i := range maxLimiters {
			if !l.allow(fmt.Sprint(i)) {
				t.Fatalf("key %d refused", i)
			}
		}
		if len(l.m) != maxLimiters {
			t.Fatalf("%d buckets, want %d", len(l.m), maxLimiters)
		}
		if !l.allow("new") {
			t.Fatal("new key refused")
		}
		// Every bucket was busy (empty), so half were forgotten, then the new one added.
		if want := maxLimiters/2 + 1; len(l.m) != want {
			t.Errorf("%d buckets after the sweep, want %d", len(l.m), want)
		}
		if l.m["new"] == nil {
			t.Error("the new key has no bucket")
		}
	})
}

func TestLimitersSweep(t *testing.T) {
	const burst = 10
	// bucket is a bucket with used tokens taken; at 0.001/s nothing refills during the test.
	bucket := func(used int) *rate.Limiter {
		lim := rate.NewLimiter(0.001, burst)
		if used > 0 && !lim.AllowN(time.Now(), used) {
			t.Fatalf("cannot take %d tokens", used)
		}
		return lim
	}
	t.Run("refilled buckets forgotten, busy ones kept", func(t *testing.T) {
		l := newLimiters(0.001, burst)
		l.m["idle1"], l.m["idle2"] = bucket(0), bucket(0)
		busy := bucket(1)
		l.m["busy"] = busy
		l.sweep()
		if len(l.m) != 1 || l.m["busy"] != busy {
			t.Errorf("buckets after sweep: %v, want only busy", keys(l.m))
		}
	})
	t.Run("at maxLimiters, forgetting the idle ones is enough", func(t *testing.T) {
		l := newLimiters(0.001, burst)
		for i := range maxLimiters {
			used := 1
			if i%1000 == 0 {
				used = 0
			}
			l.m[fmt.Sprint(i)] = bucket(used)
		}
		l.sweep()
		if want := maxLimiters - maxLimiters/1000; len(l.m) != want {
			t.Fatalf("%d buckets, want %d", len(l.m), want)
		}
		for i := range maxLimiters {
			if _, ok := l.m[fmt.Sprint(i)]; ok == (i%1000 == 0) {
				t.Fatalf("bucket %d kept = %v", i, ok)
			}
		}
	})
	t.Run("still over maxLimiters: the busiest half kept", func(t *testing.T) {
		l := newLimiters(0.001, burst)
		for i := range maxLimiters {
			used := 1 // 9 tokens left: a light caller
			if i%2 == 0 {
				used = burst // none left: a busy caller
			}
			l.m[fmt.Sprint(i)] = bucket(used)
		}
		l.sweep()
		if len(l.m) != maxLimiters/2 {
			t.Fatalf("%d buckets, want %d", len(l.m), maxLimiters/2)
		}
		for i := range maxLimiters {
			if _, ok := l.m[fmt.Sprint(i)]; ok != (i%2 == 0) {
				t.Fatalf("bucket %d kept = %v, want %v", i, ok, i%2 == 0)
			}
		}
	})
	t.Run("under maxLimiters, busy buckets all kept", func(t *testing.T) {
		l := newLimiters(0.001, burst)
		for i := range 100 {
			l.m[fmt.Sprint(i)] = bucket(1 + i%burst)
		}
		l.sweep()
		if len(l.m) != 100 {
			t.Errorf("%d buckets, want 100", len(l.m))
		}
	})
}

func keys(m map[string]*rate.Limiter) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
