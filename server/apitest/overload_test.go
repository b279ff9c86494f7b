package apitest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/servertest"
)

// lockOrganization holds an organization's row in a transaction until the returned function
// runs: a write to it waits meanwhile.
func lockOrganization(t *testing.T, env *servertest.Env, id string) func() {
	t.Helper()
	tx, err := env.Pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), `SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	return func() { _ = tx.Rollback(context.Background()) }
}

func renameReq(token, id, name string) req {
	return req{Method: http.MethodPatch, Path: orgPath(id), Token: token,
		Body: jsonBody(map[string]string{"display_name": name}), Header: headers("If-Match", `"1"`)}
}

// TestRequestDeadline: a request past RENGA_REQUEST_TIMEOUT is a 503 with Retry-After, its
// statement is cancelled in the database (it does not wait on), and nothing changed.
func TestRequestDeadline(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.RequestTimeout = 500 * time.Millisecond })
	token := env.Token(t, "organizations:write")
	org := createOrg(t, env, token, newSlug(), "Before")
	unlock := lockOrganization(t, env, org.ID)
	start := time.Now()
	rep := send(t, env, renameReq(token, org.ID, "After"))
	elapsed := time.Since(start)
	if rep.Status != http.StatusServiceUnavailable || rep.problem(t).Error != "unavailable" || rep.Header.Get("Retry-After") == "" {
		t.Fatalf("write past the deadline: %d %s (Retry-After %q)", rep.Status, rep.Body, rep.Header.Get("Retry-After"))
	}
	if elapsed > 3*time.Second {
		t.Errorf("the 503 came after %s: the deadline is 500ms", elapsed)
	}
	// The statement was cancelled, not left waiting on the lock.
	var waiting int
	for range 50 {
		if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if waiting != 0 {
		t.Errorf("%d statement(s) still wait on the lock after the 503", waiting)
	}
	unlock()
	var got organization
	send(t, env, req{Method: http.MethodGet, Path: orgPath(org.ID), Token: token}).decode(t, &got)
	if got.DisplayName != "Before" || got.Version != 1 {
		t.Errorf("after the 503 the organization is %+v: the write happened", got)
	}
	if rep := send(t, env, renameReq(token, org.ID, "After")); rep.Status != http.StatusOK {
		t.Errorf("retry after the lock went: %d %s", rep.Status, rep.Body)
	}
}

// TestInFlightBound: with RENGA_MAX_IN_FLIGHT requests busy, one more waits briefly, then gets
// a 503 with Retry-After; the busy ones finish normally and the next request is served.
func TestInFlightBound(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.MaxInFlight = 2; c.RequestTimeout = 20 * time.Second })
	token := env.Token(t, "organizations:write", "deployment:read")
	orgs := []organization{createOrg(t, env, token, newSlug(), "A"), createOrg(t, env, token, newSlug(), "B")}
	var unlocks []func()
	done := make(chan reply, len(orgs))
	for _, o := range orgs {
		unlocks = append(unlocks, lockOrganization(t, env, o.ID))
		go func() { done <- send(t, env, renameReq(token, o.ID, "Renamed")) }()
	}
	// Both busy: waiting on their locks.
	for deadline := time.Now().Add(10 * time.Second); ; {
		var waiting int
		if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests wait on their locks, want 2", waiting)
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	rep := send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/deployment", Token: token})
	if rep.Status != http.StatusServiceUnavailable || rep.problem(t).Error != "unavailable" || rep.Header.Get("Retry-After") != "1" {
		t.Fatalf("a third request: %d %s (Retry-After %q)", rep.Status, rep.Body, rep.Header.Get("Retry-After"))
	}
	if waited := time.Since(start); waited < 900*time.Millisecond || waited > 5*time.Second {
		t.Errorf("the third request waited %s for a slot, want about 1s", waited)
	}
	for _, u := range unlocks {
		u()
	}
	for range orgs {
		if rep := <-done; rep.Status != http.StatusOK {
			t.Errorf("a busy request: %d %s", rep.Status, rep.Body)
		}
	}
	if rep := send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/deployment", Token: token}); rep.Status != http.StatusOK {
		t.Errorf("after the busy requests finished: %d %s", rep.Status, rep.Body)
	}
}
