package apitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// TestImportSurvivesSIGKILL: the destination's server process is killed with SIGKILL while it
// imports, at 20 points of the archive; each time the destination is left empty, and an import
// after the last kill succeeds whole. The server is the real `renga serve` binary.
func TestImportSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the renga binary")
	}
	t.Parallel()
	src := servertest.Start(t)
	src.StartJobs(t)
	srcToken := src.Token(t, servertest.AllScopes()...)
	s := newSourceOrganization(t, src, srcToken, 20000)
	archive := download(t, src, srcToken, exportOrg(t, src, srcToken, s.OrgID))

	ctx := context.Background()
	dbURL := servertest.NewDatabase(t)
	pool, err := db.Open(ctx, dbURL, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	_, token, err := domain.CreateToken(ctx, pool, domain.NewToken{Name: "kill", Scopes: []string{"transfers:write"}})
	if err != nil {
		t.Fatal(err)
	}
	org, err := domain.CreateOrganization(ctx, pool, newSlug(), "Killed")
	if err != nil {
		t.Fatal(err)
	}
	dst := &servertest.Env{Pool: pool, DBURL: dbURL}
	dataDir := t.TempDir()

	imported := func() int {
		return countRows(t, dst, `SELECT (SELECT count(*) FROM installations WHERE organization_id = $1)
			+ (SELECT count(*) FROM observations WHERE organization_id = $1)
			+ (SELECT count(*) FROM pending_memberships WHERE organization_id = $1)
			+ (SELECT count(*) FROM transfers WHERE organization_id = $1)`, org.ID)
	}

	const points = 20
	for i := range points {
		proc := startServe(t, dbURL, dataDir)
		pr, pw := io.Pipe()
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, proc.URL+orgPath(org.ID)+"/imports", pr)
		if err != nil {
			t.Fatal(err)
		}
		hr.Header.Set("Authorization", "Bearer "+token)
		hr.Header.Set("Content-Type", "application/octet-stream")
		hr.Header.Set("Idempotency-Key", fmt.Sprint("kill-", i))
		done := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(hr)
			if err != nil { // the connection went away with the server: the expected end
				done <- nil
				return
			}
			_ = resp.Body.Close()
			if resp.StatusCode < 400 {
				done <- fmt.Errorf("import answered %d before the kill", resp.StatusCode)
				return
			}
			done <- nil
		}()
		// Point i of 20: all of the archive but the last byte for the last point (the server
		// has read and loaded everything but cannot have committed), less before.
		at := len(archive) * (i + 1) / points
		if i == points-1 {
			at = len(archive) - 1
		}
		if _, err := pw.Write(archive[:at]); err != nil {
			t.Fatal(err)
		}
		// The kill lands inside the import's transaction, after it wrote rows: a backend of
		// the destination holds a transaction ID.
		waitFor(t, 10*time.Second, "the import to write rows", func() bool {
			return countRows(t, dst, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
				AND backend_xid IS NOT NULL AND pid <> pg_backend_pid()`) > 0
		})
		time.Sleep(100 * time.Millisecond) // let the server read and load what it was sent
		if err := proc.kill(); err != nil {
			t.Fatal(err)
		}
		_ = pw.CloseWithError(errors.New("the server was killed"))
		if err := <-done; err != nil {
			t.Errorf("point %d: %v", i, err)
		}
		if n := imported(); n != 0 {
			t.Fatalf("point %d (%d of %d bytes): %d imported rows visible after SIGKILL", i, at, len(archive), n)
		}
	}
	proc := startServe(t, dbURL, dataDir)
	defer func() { _ = proc.kill() }()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, proc.URL+orgPath(org.ID)+"/imports", bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+token)
	hr.Header.Set("Content-Type", "application/octet-stream")
	hr.Header.Set("Idempotency-Key", "after-the-kills")
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated || imported() < 20000 {
		t.Errorf("import after the kills: %d, %d rows", resp.StatusCode, imported())
	}
}
