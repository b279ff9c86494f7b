package apitest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pgembed"
)

// TestDatabaseRestartUnderLoad stops and restarts PostgreSQL (a private cluster) under a
// steady load of keyed creates against a real `renga serve` process. During the outage every
// answer is 503 with Retry-After, none takes longer than the request deadline, /readyz fails
// and recovers, the process survives, and requests succeed again within 5 s of the database
// answering. Clients retry under their Idempotency-Key: every create acknowledged with a 2xx
// is there afterwards, exactly once. Background jobs resume (an invitation's mail is sent).
func TestDatabaseRestartUnderLoad(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "pgrestart-") // short: the socket path has a length limit
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cluster, err := pgembed.Start(ctx, dir, pgembed.Options{Fast: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	dbURL := cluster.URL("postgres")
	pool, err := db.Open(ctx, dbURL, 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Migrate(ctx, pool, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	_, token, err := domain.CreateToken(ctx, pool, domain.NewToken{Name: "load", Scopes: []string{"organizations:write"}})
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	proc := startProcessOn(t, dbURL, "RENGA_REQUEST_TIMEOUT=5s")

	// The load: 8 clients, each creating organizations one after another and retrying each
	// under its key until it is acknowledged.
	var (
		stop        atomic.Bool
		mu          sync.Mutex
		acked       = map[string]string{} // slug → the ID the 201 named
		unavailable atomic.Int64
		slowest     atomic.Int64
		wrong       []string
	)
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				slug, key := fmt.Sprintf("load-%d-%d", c, i), newKey()
				body := jsonBody(map[string]string{"slug": slug, "display_name": "Load"})
				for !stop.Load() {
					start := time.Now()
					rep, err := sendTo(proc, req{Method: http.MethodPost, Path: orgsPath, Token: token, Body: body,
						Header: headers("Idempotency-Key", key)})
					if d := time.Since(start); int64(d) > slowest.Load() {
						slowest.Store(int64(d))
					}
					if err != nil {
						mu.Lock()
						wrong = append(wrong, "transport: "+err.Error())
						mu.Unlock()
						return
					}
					if rep.Status == http.StatusCreated {
						var o organization
						if derr := rep.decodeE(&o); derr != nil {
							mu.Lock()
							wrong = append(wrong, "201 body: "+derr.Error())
							mu.Unlock()
						}
						mu.Lock()
						acked[slug] = o.ID
						mu.Unlock()
						break
					}
					if rep.Status == http.StatusServiceUnavailable && rep.Header.Get("Retry-After") != "" {
						unavailable.Add(1)
						time.Sleep(50 * time.Millisecond)
						continue
					}
					mu.Lock()
					wrong = append(wrong, fmt.Sprintf("%d %s", rep.Status, rep.Body))
					mu.Unlock()
					return
				}
			}
		}()
	}
	ready := func() int {
		resp, err := http.Get(proc.URL + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	time.Sleep(time.Second)
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if code := ready(); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the outage: %d, want 503", code)
	}
	during := unavailable.Load()
	if cluster, err = pgembed.Start(ctx, dir, pgembed.Options{Fast: true}); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	// Requests succeed again within 5 s of the database answering.
	ackedAt := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	before := ackedAt()
	for ackedAt() == before && time.Since(back) < 10*time.Second {
		time.Sleep(20 * time.Millisecond)
	}
	if d := time.Since(back); d > 5*time.Second {
		t.Errorf("the first create after the restart was acknowledged %s after the database answered, want within 5s", d)
	}
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()

	if len(wrong) > 0 {
		t.Errorf("answers outside 201 and 503-with-Retry-After: %v", wrong)
	}
	if during == 0 {
		t.Error("no 503 during the outage: the load did not reach it")
	}
	if d := time.Duration(slowest.Load()); d > 6*time.Second {
		t.Errorf("the slowest answer took %s; the request deadline is 5s", d)
	}
	if code := ready(); code != http.StatusOK {
		t.Errorf("/readyz after the restart: %d", code)
	}

	// Every acknowledged create is there, exactly once, with the ID its 201 named.
	pool, err = db.Open(ctx, cluster.URL("postgres"), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	rows, err := pool.Query(ctx, `SELECT slug, id FROM organizations WHERE slug LIKE 'load-%'`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{}
	for rows.Next() {
		var slug, id string
		if err := rows.Scan(&slug, &id); err != nil {
			t.Fatal(err)
		}
		stored[slug] = id
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for slug, id := range acked {
		if stored[slug] != id {
			t.Errorf("acknowledged %s as %s, stored as %q", slug, id, stored[slug])
		}
	}
	t.Logf("%d creates acknowledged, %d answers 503 during the outage, slowest answer %s",
		len(acked), during, time.Duration(slowest.Load()))

	// Background jobs resume: an invitation made now is mailed.
	var orgID string
	for _, id := range acked {
		orgID = id
		break
	}
	rep, err := sendTo(proc, req{Method: http.MethodPost, Path: orgPath(orgID) + "/invitations", Token: token,
		Body: jsonBody(map[string]string{"email": "after-restart@example.com"}), Header: headers("Idempotency-Key", newKey())})
	if err != nil || rep.Status != http.StatusCreated {
		t.Fatalf("invitation after the restart: %v %d %s", err, rep.Status, rep.Body)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if m, _ := filepath.Glob(filepath.Join(proc.DataDir, "mail", "*.eml")); len(m) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no mail sent after the restart: %s", proc.logs.String())
		}
	}
}

// decodeE is decode for goroutines: it returns the error instead of failing the test.
func (r reply) decodeE(v any) error { return json.Unmarshal(r.Body, v) }
