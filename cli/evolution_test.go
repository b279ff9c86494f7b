package cli_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUnknownValuesFromANewerServer: a server of a later release answers an organization state
// and a transfer state this CLI does not know. The CLI shows them as they are: `org get` prints
// the organization, and `transfer export --wait` stops waiting at the unknown state (instead of
// polling forever) and fails naming it.
func TestUnknownValuesFromANewerServer(t *testing.T) {
	const orgID, xfrID, at = "org_01jc3x9m1h7r4v5n8q2w6e0t9y", "xfr_01jc3x9m1h7r4v5n8q2w6e0t9y", "2026-12-01T12:00:00Z"
	transfer := func(state string) map[string]any {
		return map[string]any{"id": xfrID, "kind": "export", "state": state, "organization_id": orgID,
			"progress": map[string]any{"rows": 0, "bytes": 0}, "counts": map[string]any{}, "sha256": nil, "size_bytes": nil,
			"failure": nil, "destination_url": nil, "completed_at": nil, "created_at": at, "updated_at": at}
	}
	polls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Method + " " + r.URL.Path {
		case "GET /api/v1/operator/organizations/" + orgID:
			_ = json.NewEncoder(w).Encode(map[string]any{"id": orgID, "slug": "acme", "display_name": "Acme",
				"state": "archived", "suspended_reason": nil, "purge_after": nil, "version": 3, "created_at": at, "updated_at": at})
		case "POST /api/v1/operator/organizations/" + orgID + "/exports":
			w.Header().Set("Idempotency-Expires", "2026-12-02T12:00:00Z")
			w.WriteHeader(http.StatusAccepted)
			_ = json.NewEncoder(w).Encode(transfer("pending"))
		case "GET /api/v1/operator/transfers/" + xfrID:
			polls++
			state := "running"
			switch {
			case polls > 3: // a CLI that waited on past the unknown state ends here, and fails the test
				state = "succeeded"
			case polls > 1:
				state = "verifying"
			}
			_ = json.NewEncoder(w).Encode(transfer(state))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	env := map[string]string{"RENGA_URL": srv.URL, "RENGA_OPERATOR_TOKEN": "renga_operator_x"}

	got := run(t, env, "org", "get", orgID)
	if got.code != 0 || !strings.Contains(got.stdout, "archived") {
		t.Errorf("org get: %d\n%s\n%s", got.code, got.stdout, got.stderr)
	}
	got = run(t, env, "org", "get", orgID, "-o", "json")
	if got.code != 0 || !strings.Contains(got.stdout, `"state": "archived"`) {
		t.Errorf("org get -o json: %d\n%s\n%s", got.code, got.stdout, got.stderr)
	}
	got = run(t, env, "transfer", "export", orgID, "--wait")
	if got.code == 0 || polls != 2 || !strings.Contains(got.stdout, "verifying") || !strings.Contains(got.stderr, "export "+xfrID+" verifying") {
		t.Errorf("transfer export --wait: %d after %d polls\n%s\n%s", got.code, polls, got.stdout, got.stderr)
	}
}
