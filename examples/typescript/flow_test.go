// Package typescript runs the TypeScript client example (src/flow.ts) against a live server:
// the client is generated from openapi.yaml by openapi-typescript, type-checked by tsc
// --strict, and run with node. Node.js and npm are needed (the tools are pinned in
// package-lock.json and installed with npm ci).
package typescript

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

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

// grownSpec writes a copy of openapi.yaml as a later release could have it: one more
// organization state and one more error code, each in its closed list and its open ones.
func grownSpec(t *testing.T) string {
	t.Helper()
	spec, err := os.ReadFile("../../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(spec)
	for _, e := range []struct {
		from, to string
		count    int
	}{
		// ErrorCode's enum (indented 8) and Problem.error's x-extensible-enum (indented 10).
		{"\n        - internal\n", "\n        - internal\n        - " + newCode + "\n", 1},
		{"\n          - internal\n", "\n          - internal\n          - " + newCode + "\n", 1},
		// OrganizationState (a filter's closed list) and the state of Organization and OrgSummary.
		{"enum: [active, suspended, deletion_pending, purging, moved]", "enum: [active, suspended, deletion_pending, purging, moved, " + newState + "]", 3},
	} {
		if n := strings.Count(s, e.from); n != e.count {
			t.Fatalf("%q occurs %d times in openapi.yaml, not %d: update the test", e.from, n, e.count)
		}
		s = strings.ReplaceAll(s, e.from, e.to)
	}
	path := filepath.Join(t.TempDir(), "openapi.yaml")
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const newCode, newState = "a_code_from_a_later_release", "archived"

// TestNewValuesKeepClientsCompiling: a client regenerated from a spec with one more
// organization state and one more error code still type-checks, unchanged (its switches over
// open sets have a default branch).
func TestNewValuesKeepClientsCompiling(t *testing.T) {
	install(t)
	path := grownSpec(t)
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
	for _, v := range []string{newCode, newState} {
		if !strings.Contains(string(generated), `"`+v+`"`) {
			t.Fatalf("the grown spec's %s is not in the generated client", v)
		}
	}
	// Compile the unchanged sources against the regenerated types.
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"api.d.ts": generated}
	for _, name := range []string{"flow.ts", "evolution.ts"} {
		if files[name], err = os.ReadFile(filepath.Join("src", name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range files {
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
		t.Fatalf("the example does not compile against a spec with a new state and error code: %v\n%s", err, out)
	}
}

// TestOldClientHandlesNewValues: the client generated from openapi.yaml (type-checked by tsc
// --strict) meets a server of a later release answering an organization state and an error
// code it was generated without. The answers are valid under that release's spec and under
// openapi.yaml (open sets), though not under 0.1.0's, whose enums were closed; the client
// shows the state as it is and handles the code by its status.
func TestOldClientHandlesNewValues(t *testing.T) {
	install(t)
	const id = "org_01jc3x9m1h7r4v5n8q2w6e0t9y"
	org := map[string]any{"id": id, "slug": "acme", "display_name": "Acme", "state": newState, "suspended_reason": nil,
		"purge_after": nil, "version": 3, "created_at": "2026-11-30T12:00:00Z", "updated_at": "2026-12-01T12:00:00Z"}
	problem := map[string]any{"type": "about:blank", "title": "Archived", "status": 409, "error": newCode,
		"detail": "An archived organization cannot be suspended.", "request_id": "req_01jc3x9m1h7r4v5n8q2w6e0t9y"}
	valid := func(specPath string) error {
		spec, err := openapi3.NewLoader().LoadFromFile(specPath)
		if err != nil {
			t.Fatal(err)
		}
		return errors.Join(spec.Components.Schemas["Organization"].Value.VisitJSON(org),
			spec.Components.Schemas["Problem"].Value.VisitJSON(problem))
	}
	if err := valid(grownSpec(t)); err != nil {
		t.Fatalf("the later release's answers are not valid under its spec: %v", err)
	}
	if err := valid("../../openapi.yaml"); err != nil {
		t.Fatalf("the later release's answers are not valid under openapi.yaml (its enums are not open sets): %v", err)
	}
	if err := valid("../../api/openapi.released.yaml"); err == nil {
		t.Fatal("the later release's answers are valid under 0.1.0's closed enums: this test shows nothing")
	}

	served := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		base := "/api/v1/operator/organizations/" + id
		var status int
		var body any
		switch {
		case r.Method == http.MethodGet && r.URL.Path == base:
			w.Header().Set("Content-Type", "application/json")
			status, body = http.StatusOK, org
		case r.Method == http.MethodPost && r.URL.Path == base+"/suspend":
			w.Header().Set("Content-Type", "application/problem+json")
			status, body = http.StatusConflict, problem
		default:
			http.NotFound(w, r)
			return
		}
		served[r.Method+" "+r.URL.Path]++
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(body)
	}))
	defer srv.Close()

	npm(t, nil, "run", "--silent", "generate")
	npm(t, nil, "run", "--silent", "build")
	out := npm(t, []string{"RENGA_URL=" + srv.URL, "RENGA_OPERATOR_TOKEN=renga_operator_x", "RENGA_ORGANIZATION_ID=" + id},
		"run", "--silent", "evolution")
	for _, want := range []string{
		"state: " + newState + " (a state this client does not know)",
		"problem: refused: Archived (" + newCode + ")",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the old client did not print %q:\n%s", want, out)
		}
	}
	if len(served) != 2 {
		t.Errorf("the client made %v requests, not the two expected", served)
	}
}
