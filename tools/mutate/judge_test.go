package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A module of one package, its tests, and a test that fails without any mutant.
var fixture = map[string]string{
	"go.mod": "module example.com/m\n\ngo 1.22\n",
	"lib/lib.go": `package lib

// Max is the larger of a and b.
func Max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// Greet greets someone.
func Greet(name string) string { return "hello " + name }

// Count counts to n.
func Count(n int) int {
	c := 0
	for i := 0; i < n; i++ {
		c++
	}
	return c
}

// Same is not tested.
func Same(a, b int) bool { return a == b }
`,
	"lib/lib_test.go": `package lib

import "testing"

func TestMax(t *testing.T) {
	if Max(1, 2) != 2 || Max(3, 1) != 3 {
		t.Fatal("Max is wrong")
	}
}

func TestGreet(t *testing.T) {
	if Greet("x") != "hello x" {
		t.Fatal("Greet is wrong")
	}
}

func TestCount(t *testing.T) {
	if Count(3) != 3 {
		t.Fatal("Count is wrong")
	}
}

func TestBroken(t *testing.T) { t.Fatal("fails without any mutant") }
`,
}

// at is the position of tok in the first line of src that holds context.
func at(t *testing.T, src, context, tok string) (line, col int) {
	t.Helper()
	for i, l := range strings.Split(src, "\n") {
		if j := strings.Index(l, context); j >= 0 {
			return i + 1, j + strings.Index(context, tok) + 1
		}
	}
	t.Fatalf("no line holds %q", context)
	return 0, 0
}

// TestCoverageAndJudge runs the per-test coverage and judges mutants of each verdict in a
// module of its own, with the go command: what make mutate does, on a small scale.
func TestCoverageAndJudge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds test binaries")
	}
	dir := t.TempDir()
	for name, text := range fixture {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	tmp := t.TempDir()
	c, err := parseConfig([]string{"-target", "lib", "-state", filepath.Join(tmp, "state")})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(c.state, 0o755); err != nil {
		t.Fatal(err)
	}
	cov, err := coverage(c, "example.com/m", "key", tmp)
	if err != nil {
		t.Fatal(err)
	}
	passed := map[string]bool{}
	for _, tc := range cov.Tests {
		passed[tc.Name] = tc.Passed
		if tc.Package != "example.com/m/lib" || tc.Dir != "lib" {
			t.Errorf("%s: package %q, directory %q", tc.Name, tc.Package, tc.Dir)
		}
	}
	if len(passed) != 4 || !passed["TestMax"] || !passed["TestGreet"] || !passed["TestCount"] || passed["TestBroken"] {
		t.Fatalf("tests and whether each passed: %v", passed)
	}
	if cached, err := coverage(c, "example.com/m", "key", tmp); err != nil || len(cached.Tests) != 4 {
		t.Errorf("the coverage again, from the state directory: %v", err)
	}

	src := fixture["lib/lib.go"]
	newMutant := func(context, tok, typ string) *mutant {
		m := &mutant{File: "lib.go", Type: typ, Status: runnable}
		m.Line, m.Column = at(t, src, context, tok)
		if m.From, m.To, err = mutation([]byte(src), *m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	j := &judge{c: c, cov: cov, tmp: tmp, built: map[string]string{}}
	for _, x := range []struct {
		m            *mutant
		status, test string
		tests        int // how many tests ran
	}{
		{newMutant("a > b", ">", "CONDITIONALS_NEGATION"), killed, "TestMax", 1},
		{newMutant("a > b", ">", "CONDITIONALS_BOUNDARY"), lived, "", 1}, // equivalent: Max(2, 2) is 2 either way
		{newMutant(`"hello " + name`, "+", "ARITHMETIC_BASE"), notViable, "", 0},
		{newMutant("a == b", "==", "CONDITIONALS_NEGATION"), notCovered, "", 0},
	} {
		if err := j.judge(x.m); err != nil {
			t.Fatal(err)
		}
		if x.m.Status != x.status || x.m.Killer != x.test || x.m.Tests != x.tests {
			t.Errorf("%s %s (%s→%s): %s by %q after %d tests (%s), want %s by %q after %d", x.m.id(), x.m.Type, x.m.From, x.m.To,
				x.m.Status, x.m.Killer, x.m.Tests, x.m.Note, x.status, x.test, x.tests)
		}
	}
	if b, err := os.ReadFile(filepath.Join(c.state, "last-kill.log")); err != nil || !strings.Contains(string(b), "Max is wrong") {
		t.Errorf("last-kill.log: %q, %v; want the killing test's output", b, err)
	}

	// The loop never ends under this mutant: its test runs past its limit.
	j.c.coefficient, j.c.grace = 1, time.Second
	m := newMutant("i++", "++", "INCREMENT_DECREMENT")
	if err := j.judge(m); err != nil {
		t.Fatal(err)
	}
	if m.Status != timedOut || m.Killer != "TestCount" {
		t.Errorf("i++ made i--: %s by %q, want %s by TestCount", m.Status, m.Killer, timedOut)
	}

	// Mutants are built from an overlay: the module's file is never changed.
	if b, err := os.ReadFile(filepath.Join("lib", "lib.go")); err != nil || string(b) != src {
		t.Errorf("lib/lib.go changed: %v", err)
	}
}
