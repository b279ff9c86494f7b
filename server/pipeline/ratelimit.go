package pipeline

import (
	"math"
	"net/netip"
	"sort"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limiters hold one token bucket per key (a credential, or a source address).
type limiters struct {
	mu    sync.Mutex
	rate  rate.Limit
	burst int
	m     map[string]*rate.Limiter
}

func newLimiters(perSecond float64, burst int) *limiters {
	return &limiters{rate: rate.Limit(perSecond), burst: burst, m: map[string]*rate.Limiter{}}
}

// retryAfter is how many whole seconds a caller over the limit should wait for one request.
func (l *limiters) retryAfter() int {
	if l.rate <= 0 {
		return 1
	}
	return max(1, int(math.Ceil(1/float64(l.rate))))
}

func (l *limiters) allow(key string) bool {
	if l.rate <= 0 {
		return true
	}
	l.mu.Lock()
	lim, ok := l.m[key]
	if !ok {
		if len(l.m) >= maxLimiters {
			l.sweep()
		}
		lim = rate.NewLimiter(l.rate, l.burst)
		l.m[key] = lim
	}
	l.mu.Unlock()
	return lim.Allow()
}

// maxLimiters bounds the memory many distinct callers can make the server hold.
const maxLimiters = 10000

// sweep forgets buckets that have refilled: forgetting them changes nothing for their callers.
// If too many are still busy, it forgets the fullest half (the least active callers), so that
// a flood of new addresses cannot reset the buckets of the busiest ones.
func (l *limiters) sweep() {
	now := time.Now()
	for k, lim := range l.m {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.m, k)
		}
	}
	if len(l.m) < maxLimiters {
		return
	}
	type bucket struct {
		key    string
		tokens float64
	}
	all := make([]bucket, 0, len(l.m))
	for k, lim := range l.m {
		all = append(all, bucket{k, lim.TokensAt(now)})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].tokens > all[j].tokens })
	for _, b := range all[:len(all)/2] {
		delete(l.m, b.key)
	}
}

// sourceBucket is the rate-limit key of a source address: the address for IPv4, its /64 for
// IPv6 (one host commonly holds a whole /64).
func sourceBucket(a netip.Addr) string {
	if a.Is6() && !a.Is4In6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
