package apitest

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"renga.dev/renga/server/servertest"
)

// patchReq is a PATCH /organizations/{id}; ifMatch "" sends no If-Match.
func patchReq(token, id, ifMatch, displayName string) req {
	r := req{Method: http.MethodPatch, Path: orgPath(id), Token: token,
		Body: jsonBody(map[string]string{"display_name": displayName}), Header: http.Header{}}
	if ifMatch != "" {
		r.Header.Set("If-Match", ifMatch)
	}
	return r
}

// getOrg reads an organization and its ETag.
func getOrg(t testing.TB, env *servertest.Env, token, id string) (organization, string) {
	t.Helper()
	r := send(t, env, req{Method: http.MethodGet, Path: orgPath(id), Token: token})
	if r.Status != http.StatusOK {
		t.Fatalf("get organization: %d %s", r.Status, r.Body)
	}
	var o organization
	r.decode(t, &o)
	return o, r.Header.Get("ETag")
}

func TestIfMatchConcurrentWriters(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:write")
	org := createOrg(t, env, token, "race", "Race")

	const n = 32
	replies := make([]reply, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			replies[i], errs[i] = sendE(env, patchReq(token, org.ID, `"1"`, fmt.Sprintf("Writer %d", i)))
		}()
	}
	close(start)
	wg.Wait()

	winner := -1
	mismatches := 0
	for i, r := range replies {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		switch r.Status {
		case http.StatusOK:
			if winner >= 0 {
				t.Errorf("replies %d and %d both succeeded with If-Match \"1\"", winner, i)
			}
			winner = i
			var o organization
			r.decode(t, &o)
			if o.Version != 2 || r.Header.Get("ETag") != `"2"` {
				t.Errorf("winner: version %d, ETag %q", o.Version, r.Header.Get("ETag"))
			}
		case http.StatusPreconditionFailed:
			p := r.expectProblem(t, http.StatusPreconditionFailed, "version_mismatch")
			if p.CurrentVersion == nil || *p.CurrentVersion != 2 {
				t.Errorf("reply %d: current_version = %v, want 2: %s", i, p.CurrentVersion, r.Body)
			}
			mismatches++
		default:
			t.Errorf("reply %d: %d %s", i, r.Status, r.Body)
		}
	}
	if winner < 0 || mismatches != n-1 {
		t.Fatalf("%d succeeded, %d got 412; want 1 and %d", map[bool]int{true: 1}[winner >= 0], mismatches, n-1)
	}
	final, etag := getOrg(t, env, token, org.ID)
	if final.Version != 2 || etag != `"2"` || final.DisplayName != fmt.Sprintf("Writer %d", winner) {
		t.Errorf("final organization %+v ETag %q; want version 2 named by writer %d", final, etag, winner)
	}
}

func TestIfMatchRules(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, token := scopedToken(t, env, "organizations:write")
	org := createOrg(t, env, token, "acme", "Acme")

	unchanged := func(t *testing.T, version int64, name string) {
		t.Helper()
		o, etag := getOrg(t, env, token, org.ID)
		if o.Version != version || o.DisplayName != name || etag != fmt.Sprintf(`"%d"`, version) {
			t.Errorf("organization changed: %+v ETag %q, want version %d %q", o, etag, version, name)
		}
	}

	t.Run("missing If-Match is 428", func(t *testing.T) {
		send(t, env, patchReq(token, org.ID, "", "No tag")).expectProblem(t, http.StatusPreconditionRequired, "precondition_required")
		unchanged(t, 1, "Acme")
	})
	t.Run("star is 428", func(t *testing.T) {
		send(t, env, patchReq(token, org.ID, "*", "Star")).expectProblem(t, http.StatusPreconditionRequired, "precondition_required")
		unchanged(t, 1, "Acme")
	})
	t.Run("weak tag is 412", func(t *testing.T) {
		p := send(t, env, patchReq(token, org.ID, `W/"1"`, "Weak")).expectProblem(t, http.StatusPreconditionFailed, "version_mismatch")
		if p.CurrentVersion == nil || *p.CurrentVersion != 1 {
			t.Errorf("current_version = %v, want 1", p.CurrentVersion)
		}
		unchanged(t, 1, "Acme")
	})
	t.Run("malformed tags are 412", func(t *testing.T) {
		for _, tag := range []string{`1`, `"one"`, `"0"`, `"-1"`, `""`} {
			p := send(t, env, patchReq(token, org.ID, tag, "Malformed")).expectProblem(t, http.StatusPreconditionFailed, "version_mismatch")
			if p.CurrentVersion == nil || *p.CurrentVersion != 1 {
				t.Errorf("If-Match %s: current_version = %v, want 1", tag, p.CurrentVersion)
			}
		}
		unchanged(t, 1, "Acme")
	})
	t.Run("current tag succeeds, then it is stale", func(t *testing.T) {
		r := send(t, env, patchReq(token, org.ID, `"1"`, "Acme Inc."))
		if r.Status != http.StatusOK || r.Header.Get("ETag") != `"2"` {
			t.Fatalf("PATCH with the current tag: %d ETag %q %s", r.Status, r.Header.Get("ETag"), r.Body)
		}
		p := send(t, env, patchReq(token, org.ID, `"1"`, "Stale")).expectProblem(t, http.StatusPreconditionFailed, "version_mismatch")
		if p.CurrentVersion == nil || *p.CurrentVersion != 2 {
			t.Errorf("current_version = %v, want 2", p.CurrentVersion)
		}
		// A tag from the future is just as wrong.
		p = send(t, env, patchReq(token, org.ID, `"3"`, "Future")).expectProblem(t, http.StatusPreconditionFailed, "version_mismatch")
		if p.CurrentVersion == nil || *p.CurrentVersion != 2 {
			t.Errorf("current_version = %v, want 2", p.CurrentVersion)
		}
		unchanged(t, 2, "Acme Inc.")
	})
	t.Run("If-Match on a missing organization is 404", func(t *testing.T) {
		send(t, env, patchReq(token, "org_"+"00000000000000000000000000", `"1"`, "Ghost")).expectProblem(t, http.StatusNotFound, "not_found")
	})
}
