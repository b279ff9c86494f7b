package apitest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/server/servertest"
)

// TestImportRefusesHostileArchives (issue 58): an archive made to take the server's memory, a
// small upload that decompresses to one row of 1 GiB or to a million tiny members, is refused
// with archive_corrupt within 5 seconds, and the server's peak RSS grows by under 64 MiB. The
// archives are written as the upload goes (gzip through a pipe), so the test holds neither.
// Not parallel: the peak is the process's, so no other test may run meanwhile.
func TestImportRefusesHostileArchives(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the peak RSS is read from Linux's /proc/self/status")
	}
	env := servertest.Start(t)
	token := env.Token(t, servertest.AllScopes()...)
	d := createOrg(t, env, token, newSlug(), "Hostile")
	cases := []struct {
		name  string
		write func(tw *tar.Writer) error
	}{
		{"one row of 1 GiB", oneRow(1 << 30)},
		// The most a member holds (docs/transfer-archive.md, "Limits"), in one row.
		{"one row of 12 MiB", oneRow(12 << 20)},
		{"a million tiny members", func(tw *tar.Writer) error {
			row := []byte("{}\n")
			for i := range 1_000_000 {
				name := fmt.Sprintf("observations/%06d.jsonl", i%999_999+1)
				if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(row))}); err != nil {
					return err
				}
				if _, err := tw.Write(row); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var status int
			var body []byte
			grew := peakGrowth(t, func() { status, body = importStream(t, env, token, d.ID, c.write) })
			var p struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(body, &p); status != http.StatusBadRequest || err != nil || p.Error != "archive_corrupt" {
				t.Errorf("%d %s, want 400 archive_corrupt", status, body)
			}
			if grew >= 64<<20 {
				t.Errorf("the peak RSS grew by %d MiB, want under 64", grew>>20)
			}
			t.Logf("peak RSS grew by %.1f MiB", float64(grew)/(1<<20))
			expectEmpty(t, env, d.ID)
		})
	}
}

// oneRow writes an observations member of size bytes: the start of one row, never ended.
func oneRow(size int) func(tw *tar.Writer) error {
	return func(tw *tar.Writer) error {
		if err := tw.WriteHeader(&tar.Header{Name: "observations/000001.jsonl", Mode: 0o644, Size: int64(size)}); err != nil {
			return err
		}
		const run = 64 << 10
		row := append([]byte(`{"installation_id": "ins_`+strings.Repeat("a", 26)+`", "kind": "k", "data": {"x": "`), bytes.Repeat([]byte("x"), run)...)
		for written := 0; written < size; {
			n, err := tw.Write(row[:min(len(row), size-written)])
			if err != nil {
				return err
			}
			written += n
			row = row[len(row)-run:] // the rest of the row: all x
		}
		return nil
	}
}

// importStream sends an import whose archive write writes into a tar stream, compressed as it
// is sent, and returns the answer. The answer must come within 5 seconds.
func importStream(t *testing.T, env *servertest.Env, token, orgID string, write func(tw *tar.Writer) error) (int, []byte) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		gz, _ := gzip.NewWriterLevel(pw, gzip.BestSpeed)
		tw := tar.NewWriter(gz)
		err := write(tw)
		if err == nil {
			err = tw.Close()
		}
		if err == nil {
			err = gz.Close()
		}
		pw.CloseWithError(err) // nil: the end of the body
		done <- err
	}()
	defer func() {
		_ = pr.CloseWithError(errors.New("the test is done")) // the writer stops
		<-done
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, env.URL+orgPath(orgID)+"/imports", pr)
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Authorization", "Bearer "+token)
	hr.Header.Set("Content-Type", "application/octet-stream")
	hr.Header.Set("Idempotency-Key", newKey())
	resp, err := httpClient.Do(hr)
	if err != nil {
		t.Fatalf("no answer to the import within 5 seconds: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the answer to the import, not read within 5 seconds: %v", err)
	}
	return resp.StatusCode, body
}

// peakGrowth runs fn and returns how far the process's peak RSS (VmHWM) rose above its RSS
// before, once garbage was collected and returned to the system: Linux resets the peak to
// the current RSS when "5" is written to /proc/self/clear_refs.
func peakGrowth(t *testing.T, fn func()) int64 {
	t.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatalf("cannot reset the peak RSS: %v", err)
	}
	before := procStatusBytes(t, "VmHWM:")
	fn()
	return procStatusBytes(t, "VmHWM:") - before
}

// procStatusBytes reads a field of /proc/self/status given in kB.
func procStatusBytes(t *testing.T, field string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			f := strings.Fields(rest)
			if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil && len(f) == 2 && f[1] == "kB" {
				return kb << 10
			}
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}

// TestImportReadsExportsAtTheBounds: what an export writes is within the import's bounds: an
// organization whose observations fill several members of 4 MiB, one of them the longest an
// agent can send as PostgreSQL writes it back (a 1 MiB body of zeros in an array, with a space
// after each comma), is exported and imported whole into another deployment.
func TestImportReadsExportsAtTheBounds(t *testing.T) {
	t.Parallel()
	src := servertest.Start(t)
	src.StartJobs(t)
	token := src.Token(t, servertest.AllScopes()...)
	o, ins := orgWithInstallation(t, src, token, "At the bounds")
	ctx := context.Background()
	if _, err := src.Pool.Exec(ctx, `INSERT INTO observations (organization_id, installation_id, batch_id, observed_at, received_at, kind, data)
		SELECT $1, $2, 'b' || (g / 100), now(), now(), 'host.facts', jsonb_build_object('n', g, 'pad', repeat('p', 200)) FROM generate_series(1, 40000) g
		UNION ALL SELECT $1, $2, 'long', now(), now(), 'long', jsonb_build_object('a', (SELECT jsonb_agg(0) FROM generate_series(1, 524000)))`,
		o.ID, ins); err != nil {
		t.Fatal(err)
	}
	archive := download(t, src, token, exportOrg(t, src, token, o.ID))
	parts, longest := 0, 0
	for _, m := range readArchive(t, archive) {
		if strings.HasPrefix(m.Name, "observations/") {
			parts++
			for line := range bytes.Lines(m.Data) {
				longest = max(longest, len(line))
			}
		}
	}
	if parts < 3 || longest < 1_500_000 {
		t.Fatalf("%d members of observations, the longest row %d bytes: want several, and one of 1.5 MB", parts, longest)
	}
	dst := servertest.Start(t)
	dstToken := dst.Token(t, servertest.AllScopes()...)
	d := createOrg(t, dst, dstToken, newSlug(), "Arrived")
	if rep := send(t, dst, importReq(dstToken, d.ID, archive)); rep.Status != http.StatusCreated {
		t.Fatalf("import: %d %s", rep.Status, rep.Body)
	}
	if n := countRows(t, dst, `SELECT count(*) FROM observations WHERE organization_id = $1`, d.ID); n != 40001 {
		t.Errorf("%d observations imported, want 40001", n)
	}
}
