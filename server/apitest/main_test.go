// Package apitest tests the operator API end to end: a real server over HTTP on a real
// PostgreSQL, driven through the generated client.
package apitest

import (
	"context"
	"net/http"
	"testing"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/server/servertest"
)

func TestMain(m *testing.M) { servertest.Main(m) }

// newClient is the generated client authenticated with token.
func newClient(t testing.TB, env *servertest.Env, token string) *client.ClientWithResponses {
	t.Helper()
	c, err := client.NewClientWithResponses(env.URL, client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
