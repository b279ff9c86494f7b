package domain

import "sync"

// InstallationCache keeps, by installation ID, what authenticating an installation's intake
// needs: its public key, its organization and that organization's policy with its version.
// Nothing in it is trusted alone: the intake statement checks that the key is still the
// installation's in that organization, that the organization is active, and that the policy's
// version is still the one the limit was computed from (StalePolicyError otherwise), so a
// change made by any server takes effect on the next batch. A key that fails to verify is
// looked up again in the database. It holds at most max entries (one evicted at random when
// full).
type InstallationCache struct {
	mu  sync.RWMutex
	m   map[string]InstallationHolder
	max int
}

// NewInstallationCache makes a cache of at most max installations.
func NewInstallationCache(max int) *InstallationCache {
	return &InstallationCache{m: map[string]InstallationHolder{}, max: max}
}

// Get is the cached holder of installation id.
func (c *InstallationCache) Get(id string) (InstallationHolder, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	h, ok := c.m[id]
	return h, ok
}

// Put caches h.
func (c *InstallationCache) Put(h InstallationHolder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[h.Installation.ID]; !ok && len(c.m) >= c.max {
		for id := range c.m {
			delete(c.m, id)
			break
		}
	}
	c.m[h.Installation.ID] = h
}

// SetPolicy records a newer policy of installation id's organization, if it is cached.
func (c *InstallationCache) SetPolicy(id string, version int64, doc PolicyDocument) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.m[id]; ok && version > h.PolicyVersion {
		h.Policy, h.PolicyVersion = doc, version
		c.m[id] = h
	}
}

// Forget drops installation id.
func (c *InstallationCache) Forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}
