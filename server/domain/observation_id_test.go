package domain_test

import (
	"testing"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
)

// TestObservationIDForms: an observation ID reads back as itself in either form, obs_ and 26
// characters or the obs_<n> of an observation stored before migration 00020 (a key whose top 64
// bits are zero); anything else, or a second spelling of either, is refused.
func TestObservationIDForms(t *testing.T) {
	for _, s := range []string{"obs_1", "obs_92", "obs_9223372036854775807", db.NewID("obs"), "obs_01jc3x9m1h7r4v5n8q2w6e0t9y"} {
		id, ok := domain.ParseObservationID(s)
		if !ok || id.String() != s {
			t.Errorf("%q: read %v, shown as %q", s, ok, id.String())
		}
	}
	for _, s := range []string{"", "obs_", "obs_0", "obs_-1", "obs_007", "obs_+7", "obs_9223372036854775808", "obs_1 ",
		"obs_00000000000000000000000007", "obs_0000000000000000000000000z", "job_01jc3x9m1h7r4v5n8q2w6e0t9y", "obs_01JC3X9M1H7R4V5N8Q2W6E0T9Y"} {
		if id, ok := domain.ParseObservationID(s); ok {
			t.Errorf("%q read as %q", s, id.String())
		}
	}
}
