package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// TestTransferLoad measures export and import of an organization of RENGA_TRANSFER_ROWS
// observations (default 1,000,000, generated with SQL) beside COPY ... TO and COPY ... FROM of
// the same rows in the same run, and the server's peak RSS above its idle size during each (the
// process's VmHWM, reset before each step). Run with RENGA_TRANSFER_BENCH=1:
//
//	RENGA_TRANSFER_BENCH=1 RENGA_TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable \
//	  go test -count=1 -run TestTransferLoad -v -timeout 30m ./bench/
func TestTransferLoad(t *testing.T) {
	if os.Getenv("RENGA_TRANSFER_BENCH") == "" {
		t.Skip("load script: set RENGA_TRANSFER_BENCH=1")
	}
	rows := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("RENGA_TRANSFER_ROWS")); err == nil && v > 0 {
		rows = v
	}
	ctx := context.Background()
	src := servertest.Start(t)
	dst := servertest.Start(t)
	srcToken, dstToken := src.Token(t, servertest.AllScopes()...), dst.Token(t, servertest.AllScopes()...)
	org, err := domain.CreateOrganization(ctx, src.Pool, "bench-src", "Bench")
	if err != nil {
		t.Fatal(err)
	}
	ins := "ins_" + strings.Repeat("b", 26)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	if _, err := src.Pool.Exec(ctx, `INSERT INTO installations (id, organization_id, public_key, hostname, os) VALUES ($1, $2, $3, 'h', 'linux')`,
		ins, org.ID, key); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := src.Pool.Exec(ctx, `INSERT INTO observations (organization_id, installation_id, batch_id, observed_at, kind, data)
		SELECT $1, $2, 'b' || (g / 100), now() - g * interval '1 second', 'host.facts',
			jsonb_build_object('hostname', 'web-' || (g % 50), 'uptime', g, 'load', (g % 100) / 10.0,
				'addresses', jsonb_build_array('10.0.' || (g % 250) || '.' || (g % 200)), 'kernel', '6.1.0-13-amd64')
		FROM generate_series(1, $3::int) g`, org.ID, ins, rows); err != nil {
		t.Fatal(err)
	}
	if _, err := src.Pool.Exec(ctx, `VACUUM ANALYZE observations`); err != nil {
		t.Fatal(err)
	}
	t.Logf("transfer-load: generated %d observations in %s", rows, time.Since(start).Round(time.Millisecond))

	// The ceiling: COPY of the same rows out of the source and into the destination's
	// observations (same indexes, same foreign key), for an organization and installation made
	// there for it.
	base, err := domain.CreateOrganization(ctx, dst.Pool, "bench-copy", "Bench COPY")
	if err != nil {
		t.Fatal(err)
	}
	baseIns := "ins_" + strings.Repeat("c", 26)
	if _, err := dst.Pool.Exec(ctx, `INSERT INTO installations (id, organization_id, public_key, hostname, os) VALUES ($1, $2, $3, 'h', 'linux')`,
		baseIns, base.ID, key); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyFile := filepath.Join(dir, "copy.txt")
	f, err := os.Create(copyFile)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := withConn(ctx, src, func(c *pgx.Conn) error {
		_, err := c.PgConn().CopyTo(ctx, f, `COPY (SELECT '`+base.ID+`', '`+baseIns+`', batch_id, observed_at, received_at, kind, data
			FROM observations WHERE organization_id = '`+org.ID+`' ORDER BY id) TO STDOUT`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	copyTo := time.Since(start)
	_ = f.Close()
	f, err = os.Open(copyFile)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if err := withConn(ctx, dst, func(c *pgx.Conn) error {
		_, err := c.PgConn().CopyFrom(ctx, f, `COPY observations (organization_id, installation_id, batch_id, observed_at, received_at, kind, data) FROM STDIN`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	copyFrom := time.Since(start)
	_ = f.Close()

	// Export: the job's work, in this process (the server).
	idle := settle()
	x, _, err := domain.CreateExport(ctx, src.Pool, org.ID, "bench", false)
	if err != nil {
		t.Fatal(err)
	}
	tr, _, err := domain.StartExport(ctx, src.Pool, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	resetPeak(t)
	start = time.Now()
	if err := domain.RunExport(ctx, src.Pool, tr, domain.ArchiveSource{PublicURL: src.Config.PublicURL}); err != nil {
		t.Fatal(err)
	}
	export := time.Since(start)
	exportPeak := peak(t) - idle
	done, err := domain.GetTransfer(ctx, src.Pool, x.ID)
	if err != nil || done.State != domain.TransferSucceeded {
		t.Fatalf("export: %+v %v", done, err)
	}

	// Download over HTTP into a file.
	archiveFile := filepath.Join(dir, "archive.tar.gz")
	_, capability, _, err := authorizeAs(ctx, src, srcToken, x.ID)
	if err != nil {
		t.Fatal(err)
	}
	idle = settle()
	resetPeak(t)
	start = time.Now()
	req, _ := http.NewRequest(http.MethodGet, src.URL+"/api/v1/operator/transfers/"+x.ID+"/archive?capability="+url.QueryEscape(capability), nil)
	req.Header.Set("Authorization", "Bearer "+srcToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("download: %v %v", resp, err)
	}
	out, err := os.Create(archiveFile)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(out, resp.Body)
	_ = resp.Body.Close()
	_ = out.Close()
	if err != nil {
		t.Fatal(err)
	}
	downloadTime, downloadPeak := time.Since(start), peak(t)-idle

	// Import over HTTP, streamed from the file.
	dorg, err := domain.CreateOrganization(ctx, dst.Pool, "bench-dst", "Bench")
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(archiveFile)
	if err != nil {
		t.Fatal(err)
	}
	idle = settle()
	resetPeak(t)
	start = time.Now()
	req, _ = http.NewRequest(http.MethodPost, dst.URL+"/api/v1/operator/organizations/"+dorg.ID+"/imports", bufio.NewReader(in))
	req.Header.Set("Authorization", "Bearer "+dstToken)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Idempotency-Key", "bench-import")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	_ = in.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("import: %d %s", resp.StatusCode, body)
	}
	importTime, importPeak := time.Since(start), peak(t)-idle

	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	rate := func(d time.Duration) string { return fmt.Sprintf("%.0f rows/s", float64(rows)/d.Seconds()) }
	t.Logf("transfer-load: rows=%d archive=%s", rows, mib(n))
	t.Logf("transfer-load: COPY TO   %s (%s)", copyTo.Round(time.Millisecond), rate(copyTo))
	t.Logf("transfer-load: export    %s (%s, %.2f of COPY TO), peak RSS +%s", export.Round(time.Millisecond), rate(export),
		copyTo.Seconds()/export.Seconds(), mib(exportPeak))
	t.Logf("transfer-load: download  %s, peak RSS +%s", downloadTime.Round(time.Millisecond), mib(downloadPeak))
	t.Logf("transfer-load: COPY FROM %s (%s)", copyFrom.Round(time.Millisecond), rate(copyFrom))
	t.Logf("transfer-load: import    %s (%s, %.2f of COPY FROM), peak RSS +%s", importTime.Round(time.Millisecond), rate(importTime),
		copyFrom.Seconds()/importTime.Seconds(), mib(importPeak))
}

func withConn(ctx context.Context, env *servertest.Env, fn func(*pgx.Conn) error) error {
	c, err := env.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	return fn(c.Conn())
}

func authorizeAs(ctx context.Context, env *servertest.Env, token, id string) (domain.Transfer, string, time.Time, error) {
	var tokenID string
	if err := env.Pool.QueryRow(ctx, `SELECT id FROM operator_tokens WHERE token_hash = $1`, domain.HashSecret(token)).Scan(&tokenID); err != nil {
		return domain.Transfer{}, "", time.Time{}, err
	}
	t, _, capability, expires, err := domain.AuthorizeDownload(ctx, env.Pool, id, tokenID)
	return t, capability, expires, err
}

// settle collects garbage and returns the process's RSS (bytes): the idle size before a step.
func settle() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	return statusBytes("VmRSS:")
}

// resetPeak resets the process's peak RSS (VmHWM) to its current RSS.
func resetPeak(t testing.TB) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Logf("transfer-load: cannot reset the peak RSS (%v); peaks are since start", err)
	}
}

func peak(testing.TB) int64 { return statusBytes("VmHWM:") }

func statusBytes(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, field) {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
