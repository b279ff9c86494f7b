// Package typescript runs the TypeScript client example (src/flow.ts) against a live server:
// the client is generated from openapi.yaml by openapi-typescript, type-checked by tsc
// --strict, and run with node. Node.js and npm are needed (the tools are pinned in
// package-lock.json and installed with npm ci).
package typescript

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

func TestMain(m *testing.M) { servertest.Main(m) }

// npm runs an npm command in this directory with env added.
func npm(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("npm", args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func install(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Fatal("npm is not installed: the TypeScript client example needs Node.js and npm")
	}
	if _, err := os.Stat("node_modules/.package-lock.json"); err != nil {
		npm(t, nil, "ci", "--no-audit", "--no-fund", "--loglevel=error")
	}
}

// TestTypeScriptClientFlow: keyed create and replay, a reused key, If-Match write-back, a 412
// recovered with current_version, pagination, and an error code the client does not know.
func TestTypeScriptClientFlow(t *testing.T) {
	install(t)
	env := servertest.Start(t)
	token := env.Token(t, "organizations:write", "policies:write")
	for i := range 3 { // so that the list has more than one page of two
		if _, err := domain.CreateOrganization(context.Background(), env.Pool, fmt.Sprintf("ts-seed-%d", i), "Seed"); err != nil {
			t.Fatal(err)
		}
	}
	npm(t, nil, "run", "--silent", "generate")
	npm(t, nil, "run", "--silent", "build")
	out := npm(t, []string{"RENGA_URL=" + env.URL, "RENGA_OPERATOR_TOKEN=" + token}, "run", "--silent", "flow")
	if !strings.Contains(out, "ok: ") {
		t.Fatalf("the flow did not finish: %s", out)
	}
	t.Log(strings.TrimSpace(out))
}

// TestNewErrorCodeKeepsClientsCompiling: a client regenerated from a spec with one more error
// code still type-checks (a problem's code is an open set, so the flow's switch has a default
// branch that handles it; the flow itself checks that at run time).
func TestNewErrorCodeKeepsClientsCompiling(t *testing.T) {
	install(t)
	spec, err := os.ReadFile("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// ErrorCode's enum (indented 8) and Problem.error's x-extensible-enum (indented 10).
	const closed, open = "\n        - internal\n", "\n          - internal\n"
	if strings.Count(string(spec), closed) != 1 || strings.Count(string(spec), open) != 1 {
		t.Fatal("the error code lists are not where this test expects them")
	}
	grown := strings.Replace(string(spec), closed, closed+"        - a_code_from_a_later_release\n", 1)
	grown = strings.Replace(grown, open, open+"          - a_code_from_a_later_release\n", 1)
	path := filepath.Join(t.TempDir(), "openapi.yaml")
	if err := os.WriteFile(path, []byte(grown), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	abs, err := filepath.Abs("node_modules")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(filepath.Join(abs, ".bin", "openapi-typescript"), path, "-o", filepath.Join(dir, "api.d.ts")).CombinedOutput(); err != nil {
		t.Fatalf("openapi-typescript: %v\n%s", err, out)
	}
	generated, err := os.ReadFile(filepath.Join(dir, "api.d.ts"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(generated), "a_code_from_a_later_release") {
		t.Fatal("the grown spec's code is not in the generated client")
	}
	// Compile the unchanged flow against the regenerated types.
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	flow, err := os.ReadFile("src/flow.ts")
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"flow.ts": flow, "api.d.ts": generated} {
		if err := os.WriteFile(filepath.Join(src, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(abs, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	tsconfig, err := os.ReadFile("tsconfig.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tsconfig.json"), tsconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(abs, ".bin", "tsc"), "-p", dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the flow does not compile against a spec with one more error code: %v\n%s", err, out)
	}
}
