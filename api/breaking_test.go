package api

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// breaking runs the check CI runs (make check-breaking) on spec, with changelog as the list of
// declared breaking changes; it returns whether it passed and what it printed.
func breaking(t *testing.T, spec, changelog string) (bool, string) {
	t.Helper()
	cmd := exec.Command("go", "tool", "oasdiff", "breaking", "openapi.released.yaml", spec, "--fail-on", "ERR", "--err-ignore", changelog,
		"--severity-levels", "oasdiff-levels.txt")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errorsAs(err, &exit) {
		t.Fatalf("oasdiff: %v: %s", err, out)
	}
	return err == nil, string(out)
}

func errorsAs(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError) //nolint:errorlint // exec returns it unwrapped
	if ok {
		*target = e
	}
	return ok
}

// TestBreakingChangesAreCaught: the current spec passes against the last release with
// CHANGELOG.md; a deliberately breaking change fails until CHANGELOG.md declares it.
func TestBreakingChangesAreCaught(t *testing.T) {
	if ok, out := breaking(t, "../openapi.yaml", "../CHANGELOG.md"); !ok {
		t.Fatalf("openapi.yaml breaks clients of the last release without declaring it in CHANGELOG.md:\n%s", out)
	}
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// A request member that becomes required breaks every client that leaves it out.
	const from = "    OrganizationCreate:\n      type: object\n      additionalProperties: false\n      required: [slug, display_name]\n      properties:\n"
	if !strings.Contains(string(spec), from) {
		t.Fatal("OrganizationCreate is not where this test expects it; update the test")
	}
	broken := strings.Replace(string(spec), from,
		"    OrganizationCreate:\n      type: object\n      additionalProperties: false\n      required: [slug, display_name, plan]\n      properties:\n        plan: { type: string }\n", 1)
	dir := t.TempDir()
	brokenPath := filepath.Join(dir, "openapi.yaml")
	if err := os.WriteFile(brokenPath, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	ok, out := breaking(t, brokenPath, "../CHANGELOG.md")
	if ok || !strings.Contains(out, "POST /api/v1/operator/organizations") {
		t.Fatalf("a new required request member passed the check:\n%s", out)
	}
	// Declared in the changelog, as oasdiff words it, it passes.
	var declared []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "in API ") {
			declared = append(declared, "- "+strings.TrimPrefix(strings.TrimSpace(line), "in API "))
		} else if l := strings.TrimSpace(line); len(declared) > 0 && l != "" && !strings.HasPrefix(l, "error") && !strings.Contains(l, "changes:") {
			declared[len(declared)-1] += " " + l
		}
	}
	changelog := filepath.Join(dir, "CHANGELOG.md")
	if err := os.WriteFile(changelog, []byte("## Unreleased\n### Breaking\n"+strings.Join(declared, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, out := breaking(t, brokenPath, changelog); !ok {
		t.Errorf("the change declared in the changelog still fails:\n%s", out)
	}
}

// TestNewResponseEnumValuesAreNotBreaking: the rule CHANGELOG.md states (clients accept enum
// values of responses they do not know) is the check's: a new organization state passes.
func TestNewResponseEnumValuesAreNotBreaking(t *testing.T) {
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const states = "enum: [active, suspended, deletion_pending, purging, moved]"
	if !strings.Contains(string(spec), states) {
		t.Fatal("OrganizationState is not where this test expects it; update the test")
	}
	grown := strings.Replace(string(spec), states, "enum: [active, suspended, deletion_pending, purging, moved, archived]", 1)
	path := filepath.Join(t.TempDir(), "openapi.yaml")
	if err := os.WriteFile(path, []byte(grown), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, out := breaking(t, path, "../CHANGELOG.md"); !ok {
		t.Errorf("a new value of a response enum fails the check:\n%s", out)
	}
}
