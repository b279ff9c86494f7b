package cli_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"renga.dev/renga/cli"
	"renga.dev/renga/server/servertest"
)

// TestTransferCommands moves an organization with the commands: export --wait, download (remote
// and as a release command), import on a second deployment, list, status, complete.
func TestTransferCommands(t *testing.T) {
	t.Parallel()
	src := servertest.Start(t)
	src.StartJobs(t)
	dst := servertest.Start(t)
	remote, local := modes(t, src, src.Token(t, servertest.AllScopes()...))
	dstRemote, _ := modes(t, dst, dst.Token(t, servertest.AllScopes()...))
	type transfer struct {
		ID     string  `json:"id"`
		State  string  `json:"state"`
		Kind   string  `json:"kind"`
		SHA256 *string `json:"sha256"`
	}
	decode := func(what string, r result) transfer {
		t.Helper()
		var x transfer
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &x) != nil {
			t.Fatalf("%s: %+v", what, r)
		}
		return x
	}
	var org struct{ ID string }
	if r := run(t, remote, "-o", "json", "org", "create", "moving", "--display-name", "Moving"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &org) != nil {
		t.Fatalf("create: %+v", r)
	}
	x := decode("export --wait", run(t, remote, "-o", "json", "transfer", "export", org.ID, "--wait"))
	if x.State != "succeeded" || x.SHA256 == nil {
		t.Fatalf("export: %+v", x)
	}
	dir := t.TempDir()
	for name, env := range map[string]map[string]string{"remote": remote, "local": local} {
		file := filepath.Join(dir, name+".tar.gz")
		r := run(t, env, "transfer", "download", x.ID, "--file", file)
		b, err := os.ReadFile(file)
		sum := sha256.Sum256(b)
		if r.code != 0 || err != nil || hex.EncodeToString(sum[:]) != *x.SHA256 || !strings.Contains(r.stdout, *x.SHA256) {
			t.Fatalf("%s download: %+v (%v)", name, r, err)
		}
		if strings.Contains(r.stdout+r.stderr, "renga_download_") {
			t.Errorf("%s download prints the capability", name)
		}
	}
	var dorg struct{ ID string }
	if r := run(t, dstRemote, "-o", "json", "org", "create", "arrived", "--display-name", "Arrived"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &dorg) != nil {
		t.Fatalf("create at the destination: %+v", r)
	}
	imp := decode("import", run(t, dstRemote, "-o", "json", "transfer", "import", dorg.ID, filepath.Join(dir, "remote.tar.gz")))
	if imp.Kind != "import" || imp.State != "succeeded" || *imp.SHA256 != *x.SHA256 {
		t.Errorf("import: %+v", imp)
	}
	if r := run(t, dstRemote, "transfer", "import", dorg.ID, filepath.Join(dir, "local.tar.gz")); r.code != cli.ExitConflict {
		t.Errorf("second import: %+v, want exit %d", r, cli.ExitConflict)
	}
	if r := run(t, remote, "transfer", "list", "--organization", org.ID); r.code != 0 || !strings.Contains(r.stdout, x.ID) {
		t.Errorf("list: %+v", r)
	}
	if c := decode("complete", run(t, remote, "-o", "json", "transfer", "complete", x.ID, "--destination-url", dst.URL)); c.ID != x.ID {
		t.Errorf("complete: %+v", c)
	}
	if r := run(t, remote, "transfer", "cancel", x.ID); r.code != cli.ExitConflict {
		t.Errorf("cancel a completed export: %+v", r)
	}
	if s := decode("status", run(t, local, "-o", "json", "transfer", "status", x.ID)); s.State != "succeeded" {
		t.Errorf("status: %+v", s)
	}
	// As a release command, export --wait works the export itself: with the server's workers
	// running too (one of them writes it), and with no server working jobs at all.
	if lx := decode("local export --wait", run(t, local, "-o", "json", "transfer", "export", org.ID, "--wait")); lx.State != "succeeded" {
		t.Errorf("local export: %+v", lx)
	}
	idle := servertest.Start(t)
	_, idleLocal := modes(t, idle, idle.Token(t, servertest.AllScopes()...))
	var iorg struct{ ID string }
	if r := run(t, idleLocal, "-o", "json", "org", "create", "quiet", "--display-name", "Quiet"); r.code != 0 || json.Unmarshal([]byte(r.stdout), &iorg) != nil {
		t.Fatalf("create: %+v", r)
	}
	if ix := decode("export --wait without workers", run(t, idleLocal, "-o", "json", "transfer", "export", iorg.ID, "--wait")); ix.State != "succeeded" || ix.SHA256 == nil {
		t.Errorf("local export without workers: %+v", ix)
	}
}
