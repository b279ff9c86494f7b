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
	current, err := os.ReadFile("../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(changelog, []byte(string(current)+strings.Join(declared, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, out := breaking(t, brokenPath, changelog); !ok {
		t.Errorf("the change declared in the changelog still fails:\n%s", out)
	}
}

// grow writes a copy of openapi.yaml with each of edits (from → to, each occurring exactly as
// often as said) applied, and returns its path.
func grow(t *testing.T, edits ...edit) string {
	t.Helper()
	spec, err := os.ReadFile("../openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := string(spec)
	for _, e := range edits {
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

type edit struct {
	from, to string
	count    int
}

// TestNewResponseEnumValuesAreNotBreaking: the rule openapi.yaml and CHANGELOG.md state
// (a response's enumeration is an open set) is the check's: a release that adds an
// organization state (to its open lists in responses and to the filter's closed list) and an
// error code passes; removing a state a client may send (the filter's) fails.
func TestNewResponseEnumValuesAreNotBreaking(t *testing.T) {
	const open, closed = "x-extensible-enum: [active, suspended, deletion_pending, purging, moved]",
		"enum: [active, suspended, deletion_pending, purging, moved]"
	grown := grow(t,
		edit{open, "x-extensible-enum: [active, suspended, deletion_pending, purging, moved, archived]", 2},
		edit{"\n      " + closed, "\n      enum: [active, suspended, deletion_pending, purging, moved, archived]", 1},
		edit{"\n        - internal\n", "\n        - internal\n        - a_code_from_a_later_release\n", 1},
		edit{"\n          - internal\n", "\n          - internal\n          - a_code_from_a_later_release\n", 1})
	if ok, out := breaking(t, grown, "../CHANGELOG.md"); !ok {
		t.Errorf("a new value of a response enumeration fails the check:\n%s", out)
	}
	shrunk := grow(t, edit{"\n      " + closed, "\n      enum: [active, suspended, deletion_pending, purging]", 1})
	if ok, out := breaking(t, shrunk, "../CHANGELOG.md"); ok || !strings.Contains(out, "request-parameter-enum-value-removed") {
		t.Errorf("removing a value a client may send passes the check:\n%s", out)
	}
}
