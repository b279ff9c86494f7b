package apitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/secretbox"
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
	bin := filepath.Join(t.TempDir(), "renga")
	if out, err := exec.Command("go", "build", "-o", bin, "renga.dev/renga/cmd/renga").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
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

	// serve starts the server on a free port and returns its URL and process.
	serve := func() (string, *exec.Cmd) {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		cmd := exec.Command(bin, "serve")
		cmd.Env = append(os.Environ(), "RENGA_ENV=development", "RENGA_DATABASE_URL="+dbURL, "RENGA_LISTEN="+addr,
			"RENGA_PUBLIC_URL=http://"+addr, "RENGA_DATA_DIR="+dataDir, "RENGA_SECRET_KEY="+secretbox.NewKey())
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		base := "http://" + addr
		waitFor(t, 20*time.Second, "renga serve to answer", func() bool {
			resp, err := http.Get(base + "/healthz")
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		})
		return base, cmd
	}
	imported := func() int {
		return countRows(t, dst, `SELECT (SELECT count(*) FROM installations WHERE organization_id = $1)
			+ (SELECT count(*) FROM observations WHERE organization_id = $1)
			+ (SELECT count(*) FROM pending_memberships WHERE organization_id = $1)
			+ (SELECT count(*) FROM transfers WHERE organization_id = $1)`, org.ID)
	}

	const points = 20
	for i := range points {
		base, cmd := serve()
		pr, pw := io.Pipe()
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, base+orgPath(org.ID)+"/imports", pr)
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
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		_ = pw.CloseWithError(errors.New("the server was killed"))
		if err := <-done; err != nil {
			t.Errorf("point %d: %v", i, err)
		}
		if n := imported(); n != 0 {
			t.Fatalf("point %d (%d of %d bytes): %d imported rows visible after SIGKILL", i, at, len(archive), n)
		}
	}
	base, cmd := serve()
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, base+orgPath(org.ID)+"/imports", bytes.NewReader(archive))
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
