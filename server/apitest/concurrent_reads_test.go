package apitest

import (
	"fmt"
	"net/http"
	"sync"
	"testing"

	"renga.dev/renga/server/servertest"
)

// TestConcurrentReadsEachGetTheirOwn: authenticated reads made at once (48 requests, more than
// the pool's connections) each get their own answer: their own organization, and their own
// token's verdict (a revoked token's GETs 401 among the others' 200s).
func TestConcurrentReadsEachGetTheirOwn(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	writer := env.Token(t, "organizations:write")
	orgs := make([]organization, 12)
	for i := range orgs {
		orgs[i] = createOrg(t, env, writer, fmt.Sprintf("read-group-%d", i), fmt.Sprintf("Read group %d", i))
	}
	_, reader := scopedToken(t, env, "organizations:read")
	_, revoked := scopedToken(t, env, "organizations:read")
	if r := send(t, env, req{Method: http.MethodPost, Path: selfPath + "/revoke", Token: revoked}); r.Status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	const rounds, clients = 4, 48
	for range rounds {
		var wg sync.WaitGroup
		for i := range clients {
			wg.Go(func() {
				o := orgs[i%len(orgs)]
				token, want := reader, http.StatusOK
				if i%3 == 2 {
					token, want = revoked, http.StatusUnauthorized
				}
				r, err := sendE(env, req{Method: http.MethodGet, Path: orgPath(o.ID), Token: token})
				if err != nil {
					t.Error(err)
					return
				}
				if r.Status != want {
					t.Errorf("GET %s (client %d): %d %s; want %d", o.ID, i, r.Status, r.Body, want)
					return
				}
				if want != http.StatusOK {
					return
				}
				var got organization
				if err := r.decodeE(&got); err != nil || got.ID != o.ID || got.Slug != o.Slug {
					t.Errorf("GET %s (client %d): %+v, %v; want %s", o.ID, i, got, err, o.Slug)
				}
			})
		}
		wg.Wait()
	}
}
