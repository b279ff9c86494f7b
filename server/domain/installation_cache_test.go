package domain

import (
	"fmt"
	"testing"
)

// TestInstallationCacheBounded: the cache holds at most max installations, and up to max of
// them all at once; a newer policy replaces the cached one, an older one does not.
// Fails when: Put evicts at len > max (max+1 held) or at len < max (one held), or SetPolicy's
// version > is negated (installation_cache.go).
func TestInstallationCacheBounded(t *testing.T) {
	c := NewInstallationCache(3)
	holder := func(i int) InstallationHolder {
		return InstallationHolder{Installation: Installation{ID: fmt.Sprintf("ins_%d", i)}, PolicyVersion: 5}
	}
	for i := range 3 {
		c.Put(holder(i))
	}
	for i := range 3 {
		if _, ok := c.Get(fmt.Sprintf("ins_%d", i)); !ok {
			t.Errorf("ins_%d not cached after 3 puts in a cache of 3", i)
		}
	}
	c.Put(holder(0)) // already cached: nothing evicted
	for i := range 3 {
		if _, ok := c.Get(fmt.Sprintf("ins_%d", i)); !ok {
			t.Errorf("ins_%d evicted by putting a cached installation again", i)
		}
	}
	for i := 3; i < 10; i++ {
		c.Put(holder(i))
	}
	held := 0
	for i := range 10 {
		if _, ok := c.Get(fmt.Sprintf("ins_%d", i)); ok {
			held++
		}
	}
	if _, ok := c.Get("ins_9"); held != 3 || !ok {
		t.Errorf("after 10 puts a cache of 3 holds %d (the last: %v), want 3 with the last", held, ok)
	}

	c.SetPolicy("ins_9", 6, PolicyDocument{"newer": true})
	c.SetPolicy("ins_9", 4, PolicyDocument{"older": true})
	if h, _ := c.Get("ins_9"); h.PolicyVersion != 6 || h.Policy["newer"] != true {
		t.Errorf("after policies 6 then 4: version %d %v, want 6", h.PolicyVersion, h.Policy)
	}
	c.Forget("ins_9")
	if _, ok := c.Get("ins_9"); ok {
		t.Error("ins_9 cached after Forget")
	}
}
