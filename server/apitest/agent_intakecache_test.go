package apitest

import (
	"strings"
	"testing"

	"renga.dev/renga/server/servertest"
)

// TestIntakeAfterTheFirstBatchIsOneRoundTrip: an installation's first batch is authenticated
// from the database; its next ones from the server's cache (key, organization, policy), so a
// batch is one round trip, its statement, which checks them all again
// (TestIntakeCachedKeyIsCheckedAgain). Fails when intake reads the installation for every batch.
func TestIntakeAfterTheFirstBatchIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	trace := &servertest.RoundTrips{}
	env := servertest.StartTraced(t, trace)
	s := newAgentSetup(t, env)
	for i, want := range []bool{true, false, false} {
		trips := trace.During(func() { s.Agent.submit(t, batchBody("cache-"+itoa(i), 1, 0)).accepted(t) })
		read := false
		for _, sql := range servertest.Statements(trips) {
			read = read || strings.Contains(sql, "FROM installations i JOIN organizations o")
		}
		if read != want {
			t.Errorf("batch %d: the installation read for its authentication: %v, want %v", i+1, read, want)
		}
		if !want && len(trips) != 1 {
			t.Errorf("batch %d: %d round trips, want 1: %q", i+1, len(trips), servertest.Statements(trips))
		}
	}
}
