package organization

import "testing"

// TestLiveStates: Terraform manages an organization that is active, suspended or in a state a
// newer server has that this provider does not know (kept and shown as it is, never dropped to
// be created again); one whose deletion is scheduled, being purged or moved away is gone.
func TestLiveStates(t *testing.T) {
	for state, want := range map[string]bool{
		"active": true, "suspended": true, "archived": true,
		"deletion_pending": false, "purging": false, "moved": false,
	} {
		if got := live(state); got != want {
			t.Errorf("live(%q) = %v, want %v", state, got, want)
		}
	}
}
