// Package gen_test checks the generated code is what openapi.yaml generates, and that the
// server is bound to the spec: removing an operation from it breaks the build.
package gen_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// copyModule copies the module's source files (no build output, no VCS data) into a temp dir.
func copyModule(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dst := t.TempDir()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", ".renga", "node_modules":
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func goCmd(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	return cmd.CombinedOutput()
}

var generated = []string{"gen/api/api.gen.go", "gen/client/client.gen.go"}

func TestGeneratedCodeIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("regenerates code")
	}
	t.Parallel()
	dir := copyModule(t)
	if out, err := goCmd(dir, "generate", "./gen/..."); err != nil {
		t.Fatalf("go generate: %v\n%s", err, out)
	}
	for _, f := range generated {
		want, _ := os.ReadFile(filepath.Join("..", f))
		got, _ := os.ReadFile(filepath.Join(dir, f))
		if !bytes.Equal(want, got) {
			t.Errorf("%s is stale: run make generate and commit", f)
		}
	}
}

func TestRemovingAnOperationBreaksTheBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("regenerates code and builds")
	}
	t.Parallel()
	dir := copyModule(t)
	spec := filepath.Join(dir, "openapi.yaml")
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	// Drop the /api/v1/operator/organizations/{organization_id} path item.
	var kept []string
	skipping := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "  /") {
			skipping = line == "  /api/v1/operator/organizations/{organization_id}:"
		} else if !strings.HasPrefix(line, "   ") && line != "" {
			skipping = false
		}
		if !skipping {
			kept = append(kept, line)
		}
	}
	if len(kept) == len(strings.Split(string(b), "\n")) {
		t.Fatal("the path to remove is not in openapi.yaml")
	}
	if err := os.WriteFile(spec, []byte(strings.Join(kept, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := goCmd(dir, "generate", "./gen/..."); err != nil {
		t.Fatalf("go generate: %v\n%s", err, out)
	}
	out, err := goCmd(dir, "build", "./...")
	if err == nil {
		t.Fatal("the server still builds without an operation it implements")
	}
	if !strings.Contains(string(out), "GetOrganization") && !strings.Contains(string(out), "UpdateOrganization") {
		t.Errorf("build failed for another reason:\n%s", out)
	}
}
