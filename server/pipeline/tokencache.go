package pipeline

import (
	"sync"
	"time"

	"renga.dev/renga/server/domain"
)

// tokenCache keeps the operator tokens this server found usable, by the hash of their secret, so
// that a write skips the token's lookup (a round trip): the write's transaction re-checks the
// token first (domain.BeginWrite), and that check is the authority. A token never changes but
// for its revocation, so what an entry says of its scopes, expiry and allowed sources stays
// true; only a revocation needs the database, and the transaction's check sees it, here or on
// any other server. Reads never use the cache: their lookup travels with their read.
//
// An entry lives at most tokenCacheTTL, and the cache holds at most tokenCacheSize tokens (when
// full, one entry makes way: a token that loses its place is looked up on its next write).
type tokenCache struct {
	mu      sync.Mutex
	entries map[string]cachedToken
}

type cachedToken struct {
	token domain.Token
	until time.Time
}

const (
	tokenCacheTTL  = 5 * time.Minute
	tokenCacheSize = 4096
)

func newTokenCache() *tokenCache { return &tokenCache{entries: map[string]cachedToken{}} }

// get is the token whose secret hashes to hash, if the cache holds it.
func (c *tokenCache) get(hash []byte, now time.Time) (domain.Token, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[string(hash)]
	if !ok {
		return domain.Token{}, false
	}
	if !now.Before(e.until) {
		delete(c.entries, string(hash))
		return domain.Token{}, false
	}
	return e.token, true
}

// put keeps t, which the database just showed usable.
func (c *tokenCache) put(hash []byte, t domain.Token, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[string(hash)]; !ok && len(c.entries) >= tokenCacheSize {
		for k := range c.entries { // an arbitrary entry: map iteration starts anywhere
			delete(c.entries, k)
			break
		}
	}
	c.entries[string(hash)] = cachedToken{token: t, until: now.Add(tokenCacheTTL)}
}

// forget drops the token the database refused.
func (c *tokenCache) forget(hash []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, string(hash))
}
