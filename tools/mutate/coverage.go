package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// A block of a coverage profile: start line and column, end line and column.
type block [4]int

// covers is gremlins' rule (internal/coverage): a token is covered by a block when it is on a
// line strictly inside it, or on its first or last line within its columns.
func (b block) covers(line, col int) bool {
	switch {
	case line > b[0] && line < b[2]:
		return true
	case b[0] == b[2]:
		return line == b[0] && col >= b[1] && col <= b[3]
	case line == b[0]:
		return col >= b[1]
	case line == b[2]:
		return col <= b[3]
	}
	return false
}

type testCoverage struct {
	Package string             `json:"package"` // an import path
	Dir     string             `json:"dir"`     // its directory, relative to the module's root
	Name    string             `json:"name"`
	Seconds float64            `json:"seconds"`
	Passed  bool               `json:"passed"`
	Blocks  map[string][]block `json:"blocks"` // file (relative to the module's root) → blocks reached
}

type coverageSet struct {
	Tests []testCoverage `json:"tests"`
}

// coverage runs every selected test alone under a coverage build of the target (once per tree:
// cached in the state directory) and returns which blocks each reaches.
func coverage(c config, module, key, tmp string) (*coverageSet, error) {
	path := filepath.Join(c.state, "coverage-"+key+".json")
	if b, err := os.ReadFile(path); err == nil {
		var cov coverageSet
		if err := json.Unmarshal(b, &cov); err != nil {
			return nil, err
		}
		log.Printf("per-test coverage: %s (%d tests)", path, len(cov.Tests))
		return &cov, nil
	}
	pkgs, err := output("go", append([]string{"list", "-f", "{{.ImportPath}} {{.Dir}}"}, c.packages...)...)
	if err != nil {
		return nil, err
	}
	root, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	var cov coverageSet
	start := time.Now()
	for _, line := range strings.Split(strings.TrimSpace(pkgs), "\n") {
		pkg, dir, _ := strings.Cut(line, " ")
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return nil, err
		}
		tests, err := packageCoverage(c, module, tmp, pkg, dir, filepath.ToSlash(rel))
		if err != nil {
			return nil, err
		}
		cov.Tests = append(cov.Tests, tests...)
	}
	log.Printf("per-test coverage of %d tests in %s", len(cov.Tests), time.Since(start).Round(time.Second))
	b, err := json.Marshal(cov)
	if err != nil {
		return nil, err
	}
	return &cov, os.WriteFile(path, b, 0o644)
}

// packageCoverage builds one package's tests with coverage of the target and runs each selected
// test alone. A test that fails without any mutant is kept, as not passed: it judges none.
func packageCoverage(c config, module, tmp, pkg, dir, rel string) ([]testCoverage, error) {
	bin := filepath.Join(tmp, strings.ReplaceAll(pkg, "/", "_")+".cover.test")
	t0 := time.Now()
	if out, err := combined(".", "go", "test", "-c", "-vet=off", "-o", bin, "-cover", "-covermode", "set",
		"-coverpkg", "./"+c.target+"/...", pkg); err != nil {
		return nil, fmt.Errorf("build %s with coverage: %w\n%s", pkg, err, out)
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, nil // no test files
	}
	list, err := combined(dir, bin, "-test.list", c.run)
	if err != nil {
		return nil, fmt.Errorf("list the tests of %s: %w\n%s", pkg, err, list)
	}
	log.Printf("%s: built with coverage in %s", pkg, time.Since(t0).Round(time.Second))
	var tests []testCoverage
	for _, name := range strings.Fields(string(list)) {
		if !strings.HasPrefix(name, "Test") && !strings.HasPrefix(name, "Fuzz") && !strings.HasPrefix(name, "Example") {
			continue
		}
		profile := filepath.Join(tmp, "cover.out")
		_ = os.Remove(profile)
		t0 := time.Now()
		out, err := combined(dir, bin, "-test.run", "^"+name+"$", "-test.count=1", "-test.timeout=15m",
			"-test.coverprofile", profile)
		tc := testCoverage{Package: pkg, Dir: rel, Name: name, Seconds: time.Since(t0).Seconds(), Passed: err == nil}
		if err != nil {
			log.Printf("%s %s FAILS without any mutant: it judges none\n%s", pkg, name, tail(out, 20))
		} else if tc.Blocks, err = readProfile(profile, module); err != nil {
			return nil, err
		}
		log.Printf("%s %s: %.1fs", pkg, name, tc.Seconds)
		tests = append(tests, tc)
	}
	return tests, nil
}

// readProfile reads the blocks a coverage profile shows reached, by file relative to the module.
func readProfile(path, module string) (map[string][]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	blocks, err := parseProfile(f, module)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return blocks, nil
}

// parseProfile is readProfile's reading of the profile's text.
func parseProfile(r io.Reader, module string) (map[string][]block, error) {
	blocks := map[string][]block{}
	s := bufio.NewScanner(r)
	for s.Scan() {
		// renga.dev/renga/server/domain/usage.go:133.4,135.5 2 1
		line := s.Text()
		if strings.HasPrefix(line, "mode:") || line == "" {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			return nil, fmt.Errorf("unexpected line %q", line)
		}
		if fields[2] == "0" {
			continue
		}
		file, span, ok := strings.Cut(fields[0], ":")
		if !ok {
			return nil, fmt.Errorf("unexpected line %q", line)
		}
		var b block
		if _, err := fmt.Sscanf(span, "%d.%d,%d.%d", &b[0], &b[1], &b[2], &b[3]); err != nil {
			return nil, fmt.Errorf("unexpected line %q", line)
		}
		file = strings.TrimPrefix(file, module+"/")
		blocks[file] = append(blocks[file], b)
	}
	return blocks, s.Err()
}

// mergedProfile is every test's coverage as one profile, in the form go test writes: what
// gremlins is given instead of running the tests itself.
func mergedProfile(cov *coverageSet, module string) string {
	var b strings.Builder
	b.WriteString("mode: set\n")
	for _, t := range cov.Tests {
		for file, blocks := range t.Blocks {
			for _, bl := range blocks {
				fmt.Fprintf(&b, "%s/%s:%d.%d,%d.%d 1 1\n", module, file, bl[0], bl[1], bl[2], bl[3])
			}
		}
	}
	return b.String()
}
