// Command mutate is make mutate's runner (docs/mutation-testing.md). Gremlins (pinned in go.mod)
// decides which mutants exist: its dry run lists every token it would change in the target's
// files. This program judges them, faster than gremlins' own executor can on this code base:
//
//   - Per-test coverage, once. Each selected test runs alone under a coverage build of the
//     target, and the blocks it reaches are kept (in bin/mutate/, keyed by the commit and the
//     uncommitted changes). A mutant is then tried against only the tests that reach its
//     token, fastest first, and the first failure ends its run. A mutant no test reaches is
//     "not covered" without a build.
//   - Builds in place. Gremlins copies the module and runs `go test` in the copy; this builds in
//     the module itself with `go test -c -overlay`, the overlay replacing the one mutated
//     file, so only the target and the packages above it recompile, and links with -s -w.
//
// Each verdict is appended to bin/mutate/results-<key>.jsonl as it is reached: a run stopped
// halfway resumes where it was when started again on the same tree.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/scanner"
	"go/token"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Mutant statuses, gremlins' names.
const (
	killed     = "KILLED"
	lived      = "LIVED"
	timedOut   = "TIMED OUT"
	notViable  = "NOT VIABLE"
	notCovered = "NOT COVERED"
	runnable   = "RUNNABLE"
)

type config struct {
	target      string
	packages    []string
	run         string
	files       []string
	gremlins    string
	state       string
	coefficient float64
	ldflags     string
	dryRun      bool
	only        map[string]bool
	output      string
}

func main() {
	log.SetFlags(0)
	var c config
	var packages, files, only string
	flag.StringVar(&c.target, "target", "server/domain", "the package directory to mutate (with its subpackages)")
	flag.StringVar(&packages, "packages", "", "the packages whose tests judge a mutant (space-separated; default ./TARGET/...)")
	flag.StringVar(&c.run, "run", ".", "the tests that judge a mutant (a go test -run pattern)")
	flag.StringVar(&files, "files", "", "only these files of the target (space-separated, relative to it)")
	flag.StringVar(&c.gremlins, "gremlins", "bin/gremlins", "the gremlins binary")
	flag.StringVar(&c.state, "state", "bin/mutate", "where coverage and results are kept")
	flag.Float64Var(&c.coefficient, "timeout-coefficient", 3, "a test run longer than this times its baseline is a timed-out mutant")
	flag.StringVar(&c.ldflags, "ldflags", "-s -w", "the linker flags of the mutants' test binaries")
	flag.BoolVar(&c.dryRun, "dry-run", false, "list the mutants and the tests that reach each, test none")
	flag.StringVar(&only, "only", "", "judge only these mutants (space-separated file:line:column, relative to the target), again even if judged")
	flag.StringVar(&c.output, "output", "", "the JSON report (default bin/mutate-<target's base name>.json)")
	flag.Parse()
	c.target = strings.Trim(filepath.ToSlash(c.target), "./")
	c.packages = strings.Fields(packages)
	if len(c.packages) == 0 {
		c.packages = []string{"./" + c.target + "/..."}
	}
	c.files = strings.Fields(files)
	c.only = map[string]bool{}
	for _, m := range strings.Fields(only) {
		c.only[m] = true
	}
	if c.output == "" {
		c.output = filepath.Join("bin", "mutate-"+filepath.Base(c.target)+".json")
	}
	if err := run(c); err != nil {
		log.Fatal("mutate: ", err)
	}
}

func run(c config) error {
	if _, err := os.Stat("go.mod"); err != nil {
		return errors.New("run from the module's root")
	}
	if err := os.MkdirAll(c.state, 0o755); err != nil {
		return err
	}
	module, err := output("go", "list", "-m")
	if err != nil {
		return err
	}
	module = strings.TrimSpace(module)
	key, err := treeKey(c)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()

	started := time.Now()
	cov, err := coverage(c, module, key, tmp)
	if err != nil {
		return err
	}
	mutants, err := enumerate(c, cov, tmp)
	if err != nil {
		return err
	}
	resultsPath := filepath.Join(c.state, "results-"+key+".jsonl")
	done, err := readResults(resultsPath)
	if err != nil {
		return err
	}
	results, err := os.OpenFile(resultsPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = results.Close() }()

	j := judge{c: c, cov: cov, tmp: tmp, built: map[string]string{}}
	todo := 0
	for _, m := range mutants {
		if m.Status == runnable && (len(c.only) == 0 || c.only[m.id()]) {
			todo++
		}
	}
	log.Printf("%d mutants: %d to judge (%d already judged on this tree), results in %s", len(mutants), todo, len(done), resultsPath)
	verdicts := map[string]mutant{} // the same change reached twice (gremlins lists `a - b` twice)
	n := 0
	for i := range mutants {
		m := &mutants[i]
		if m.Status != runnable {
			continue
		}
		if len(c.only) > 0 {
			if !c.only[m.id()] {
				if d, ok := done[m.key()]; ok {
					*m = d
				}
				continue
			}
		} else if d, ok := done[m.key()]; ok {
			*m = d
			continue
		}
		n++
		if c.dryRun {
			log.Printf("%s %s %s→%s: %s", m.id(), m.Type, m.From, m.To, strings.Join(m.testNames(cov, c.target), " "))
			continue
		}
		if v, ok := verdicts[m.change()]; ok {
			m.Status, m.Killer, m.Note = v.Status, v.Killer, "the same change as "+v.Type
		} else {
			if err := j.judge(m); err != nil {
				return err
			}
			verdicts[m.change()] = *m
		}
		line, err := json.Marshal(m)
		if err != nil {
			return err
		}
		if _, err := results.Write(append(line, '\n')); err != nil {
			return err
		}
		log.Printf("[%d/%d] %12s %s at %s (%s→%s) %s", n, todo, m.Status, m.Type, m.id(), m.From, m.To, m.detail())
	}
	return report(c, module, mutants, time.Since(started))
}

// treeKey names the tree under test: the commit, the uncommitted changes and the tests chosen.
func treeKey(c config) (string, error) {
	h := sha256.New()
	for _, args := range [][]string{{"rev-parse", "HEAD"}, {"diff", "HEAD"}, {"status", "--porcelain"}} {
		out, err := output("git", args...)
		if err != nil {
			return "", err
		}
		_, _ = io.WriteString(h, out)
	}
	_, _ = fmt.Fprintf(h, "%q %q %q", c.target, c.packages, c.run)
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

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
		bin := filepath.Join(tmp, strings.ReplaceAll(pkg, "/", "_")+".cover.test")
		t0 := time.Now()
		if out, err := combined(".", "go", "test", "-c", "-vet=off", "-o", bin, "-cover", "-covermode", "set",
			"-coverpkg", "./"+c.target+"/...", pkg); err != nil {
			return nil, fmt.Errorf("build %s with coverage: %w\n%s", pkg, err, out)
		}
		if _, err := os.Stat(bin); err != nil {
			continue // no test files
		}
		list, err := combined(dir, bin, "-test.list", c.run)
		if err != nil {
			return nil, fmt.Errorf("list the tests of %s: %w\n%s", pkg, err, list)
		}
		log.Printf("%s: built with coverage in %s", pkg, time.Since(t0).Round(time.Second))
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return nil, err
		}
		for _, name := range strings.Fields(string(list)) {
			if !strings.HasPrefix(name, "Test") && !strings.HasPrefix(name, "Fuzz") && !strings.HasPrefix(name, "Example") {
				continue
			}
			profile := filepath.Join(tmp, "cover.out")
			_ = os.Remove(profile)
			t0 := time.Now()
			out, err := combined(dir, bin, "-test.run", "^"+name+"$", "-test.count=1", "-test.timeout=15m",
				"-test.coverprofile", profile)
			tc := testCoverage{Package: pkg, Dir: filepath.ToSlash(rel), Name: name,
				Seconds: time.Since(t0).Seconds(), Passed: err == nil}
			if err != nil {
				log.Printf("%s %s FAILS without any mutant: it judges none\n%s", pkg, name, tail(out, 20))
			} else if tc.Blocks, err = readProfile(profile, module); err != nil {
				return nil, err
			}
			log.Printf("%s %s: %.1fs", pkg, name, tc.Seconds)
			cov.Tests = append(cov.Tests, tc)
		}
	}
	log.Printf("per-test coverage of %d tests in %s", len(cov.Tests), time.Since(start).Round(time.Second))
	b, err := json.Marshal(cov)
	if err != nil {
		return nil, err
	}
	return &cov, os.WriteFile(path, b, 0o644)
}

// readProfile reads the blocks a coverage profile shows reached, by file relative to the module.
func readProfile(path, module string) (map[string][]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	blocks := map[string][]block{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		// renga.dev/renga/server/domain/usage.go:133.4,135.5 2 1
		line := s.Text()
		if strings.HasPrefix(line, "mode:") || line == "" {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s: unexpected line %q", path, line)
		}
		if fields[2] == "0" {
			continue
		}
		file, span, ok := strings.Cut(fields[0], ":")
		if !ok {
			return nil, fmt.Errorf("%s: unexpected line %q", path, line)
		}
		var b block
		if _, err := fmt.Sscanf(span, "%d.%d,%d.%d", &b[0], &b[1], &b[2], &b[3]); err != nil {
			return nil, fmt.Errorf("%s: unexpected line %q", path, line)
		}
		file = strings.TrimPrefix(file, module+"/")
		blocks[file] = append(blocks[file], b)
	}
	return blocks, s.Err()
}

// A mutant, as gremlins lists it, and its verdict.
type mutant struct {
	File   string  `json:"file"` // relative to the target
	Line   int     `json:"line"`
	Column int     `json:"column"`
	Type   string  `json:"type"`
	From   string  `json:"from"`
	To     string  `json:"to"`
	Status string  `json:"status"`
	Killer string  `json:"killer,omitempty"` // the test that failed
	Tests  int     `json:"tests,omitempty"`  // how many tests ran
	Build  float64 `json:"build_seconds,omitempty"`
	Run    float64 `json:"test_seconds,omitempty"`
	Note   string  `json:"note,omitempty"`
}

func (m *mutant) id() string     { return fmt.Sprintf("%s:%d:%d", m.File, m.Line, m.Column) }
func (m *mutant) key() string    { return m.id() + " " + m.Type }
func (m *mutant) change() string { return m.id() + " " + m.To }

func (m *mutant) detail() string {
	switch {
	case m.Killer != "":
		return fmt.Sprintf("by %s (%d tests, build %.0fs, tests %.0fs)", m.Killer, m.Tests, m.Build, m.Run)
	case m.Note != "":
		return m.Note
	default:
		return fmt.Sprintf("(%d tests, build %.0fs, tests %.0fs)", m.Tests, m.Build, m.Run)
	}
}

// reaching lists the passing tests whose coverage reaches the mutant's token, fastest first.
func (m *mutant) reaching(cov *coverageSet, target string) []testCoverage {
	file := target + "/" + m.File
	var ts []testCoverage
	for _, t := range cov.Tests {
		if !t.Passed {
			continue
		}
		for _, b := range t.Blocks[file] {
			if b.covers(m.Line, m.Column) {
				ts = append(ts, t)
				break
			}
		}
	}
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].Seconds < ts[j].Seconds })
	return ts
}

func (m *mutant) testNames(cov *coverageSet, target string) []string {
	var names []string
	for _, t := range m.reaching(cov, target) {
		names = append(names, t.Name)
	}
	return names
}

// enumerate asks gremlins for the target's mutants (a dry run whose coverage step is answered
// with the per-test coverage merged, by tools/mutate/go first on its PATH).
func enumerate(c config, cov *coverageSet, tmp string) ([]mutant, error) {
	profile := filepath.Join(tmp, "merged.out")
	var b strings.Builder
	b.WriteString("mode: set\n")
	module, err := output("go", "list", "-m")
	if err != nil {
		return nil, err
	}
	for _, t := range cov.Tests {
		for file, blocks := range t.Blocks {
			for _, bl := range blocks {
				fmt.Fprintf(&b, "%s/%s:%d.%d,%d.%d 1 1\n", strings.TrimSpace(module), file, bl[0], bl[1], bl[2], bl[3])
			}
		}
	}
	if err := os.WriteFile(profile, []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	listing := filepath.Join(tmp, "mutants.json")
	args := []string{"unleash", "--dry-run", "--integration", "--coverpkg", "./" + c.target + "/...", "--output", listing}
	if len(c.files) > 0 {
		keep := map[string]bool{}
		for _, f := range c.files {
			keep[f] = true
		}
		err := filepath.WalkDir(c.target, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			rel, err := filepath.Rel(c.target, path)
			if err != nil {
				return err
			}
			if !keep[filepath.ToSlash(rel)] {
				args = append(args, "--exclude-files", "^"+regexp.QuoteMeta(filepath.ToSlash(rel))+"$")
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	args = append(args, filepath.Join(wd, c.target))
	realGo, err := exec.LookPath("go")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(c.gremlins, args...)
	cmd.Env = append(os.Environ(),
		"PATH="+filepath.Join(wd, "tools", "mutate")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"MUTATE_GO="+realGo, "MUTATE_COVERPROFILE="+profile)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("gremlins --dry-run: %w\n%s", err, out)
	}
	raw, err := os.ReadFile(listing)
	if err != nil {
		return nil, err
	}
	var listed struct {
		Files []struct {
			Name      string `json:"file_name"`
			Mutations []struct {
				Type   string `json:"type"`
				Status string `json:"status"`
				Line   int    `json:"line"`
				Column int    `json:"column"`
			} `json:"mutations"`
		} `json:"files"`
	}
	if err := json.Unmarshal(raw, &listed); err != nil {
		return nil, err
	}
	var ms []mutant
	for _, f := range listed.Files {
		src, err := os.ReadFile(filepath.Join(c.target, f.Name))
		if err != nil {
			return nil, err
		}
		for _, x := range f.Mutations {
			m := mutant{File: filepath.ToSlash(f.Name), Line: x.Line, Column: x.Column, Type: x.Type, Status: x.Status}
			if m.From, m.To, err = mutation(src, m); err != nil {
				return nil, err
			}
			ms = append(ms, m)
		}
	}
	sort.SliceStable(ms, func(i, j int) bool {
		a, b := ms[i], ms[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		return a.Type < b.Type
	})
	return ms, nil
}

// gremlins' mutations (internal/engine/mappings.go) by type and token.
var mutations = map[string]map[string]string{
	"ARITHMETIC_BASE":       {"+": "-", "*": "/", "/": "*", "%": "*", "-": "+"},
	"CONDITIONALS_BOUNDARY": {">=": ">", ">": ">=", "<=": "<", "<": "<="},
	"CONDITIONALS_NEGATION": {"==": "!=", ">=": "<", ">": "<=", "<=": ">", "<": ">=", "!=": "=="},
	"INCREMENT_DECREMENT":   {"--": "++", "++": "--"},
	"INVERT_ASSIGNMENTS":    {"+=": "-=", "*=": "/=", "/=": "*=", "%=": "%=", "-=": "+="},
	"INVERT_LOGICAL":        {"&&": "||", "||": "&&"},
	"INVERT_LOOPCTRL":       {"break": "continue", "continue": "break"},
	"INVERT_NEGATIVES":      {"-": "+"},
	"REMOVE_SELF_ASSIGNMENTS": {"+=": "=", "&=": "=", "&^=": "=", "*=": "=", "|=": "=",
		"/=": "=", "%=": "=", "<<=": "=", ">>=": "=", "-=": "=", "^=": "="},
	"INVERT_BITWISE": {"&": "|", "|": "&", "^": "&", "&^": "&", "<<": ">>", ">>": "<<"},
	"INVERT_BWASSIGN": {"&=": "|=", "|=": "&=", "^=": "&=", "&^=": "&=", "<<=": ">>=",
		">>=": "<<="},
}

// offset is the byte offset of a 1-based line and byte column.
func offset(src []byte, line, col int) (int, error) {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(src[off:], '\n')
		if i < 0 {
			return 0, fmt.Errorf("no line %d", line)
		}
		off += i + 1
	}
	return off + col - 1, nil
}

// mutation finds the token at the mutant's position (scanning the file as the compiler does)
// and what the mutant's type makes of it.
func mutation(src []byte, m mutant) (from, to string, err error) {
	table, ok := mutations[m.Type]
	if !ok {
		return "", "", fmt.Errorf("%s: unknown mutation type %s", m.id(), m.Type)
	}
	off, err := offset(src, m.Line, m.Column)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", m.id(), err)
	}
	fset := token.NewFileSet()
	file := fset.AddFile(m.File, -1, len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, 0)
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			return "", "", fmt.Errorf("%s: no token there", m.id())
		}
		if file.Offset(pos) < off {
			continue
		}
		if file.Offset(pos) > off {
			return "", "", fmt.Errorf("%s: no token starts there", m.id())
		}
		from = tok.String()
		if lit != "" && tok.IsKeyword() {
			from = lit
		}
		if to, ok = table[from]; !ok {
			return "", "", fmt.Errorf("%s: %s does not mutate %q", m.id(), m.Type, from)
		}
		return from, to, nil
	}
}

type judge struct {
	c     config
	cov   *coverageSet
	tmp   string
	built map[string]string // package → test binary of the current mutant
}

// judge builds the mutant's test binaries (lazily, a package when its first test is due) and
// runs the tests that reach it, fastest first, until one fails.
func (j *judge) judge(m *mutant) error {
	tests := m.reaching(j.cov, j.c.target)
	if len(tests) == 0 {
		m.Status, m.Note = notCovered, "no selected test reaches it"
		return nil
	}
	path := filepath.Join(j.c.target, m.File)
	src, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	off, err := offset(src, m.Line, m.Column)
	if err != nil {
		return err
	}
	mutated := append(append(append([]byte{}, src[:off]...), m.To...), src[off+len(m.From):]...)
	dir := filepath.Join(j.tmp, "mutant")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	file := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(file, mutated, 0o644); err != nil {
		return err
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {abs: file}})
	if err != nil {
		return err
	}
	overlayPath := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayPath, overlay, 0o644); err != nil {
		return err
	}
	clear(j.built)
	for _, t := range tests {
		bin, ok := j.built[t.Package]
		if !ok {
			bin = filepath.Join(dir, strings.ReplaceAll(t.Package, "/", "_")+".test")
			t0 := time.Now()
			out, err := combined(".", "go", "test", "-c", "-vet=off", "-overlay", overlayPath, "-ldflags", j.c.ldflags, "-o", bin, t.Package)
			m.Build += time.Since(t0).Seconds()
			if err != nil {
				m.Status, m.Note = notViable, "does not compile: "+firstLine(out)
				return nil
			}
			j.built[t.Package] = bin
		}
		limit := time.Duration(j.c.coefficient*t.Seconds*float64(time.Second)) + 20*time.Second
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		t0 := time.Now()
		out, err := combinedContext(ctx, t.Dir, bin, "-test.run", "^"+t.Name+"$", "-test.count=1", "-test.failfast",
			"-test.timeout", (limit + 10*time.Second).String())
		m.Run += time.Since(t0).Seconds()
		m.Tests++
		timeout := ctx.Err() != nil
		cancel()
		switch {
		case timeout:
			m.Status, m.Killer = timedOut, t.Name
			return nil
		case err != nil:
			m.Status, m.Killer = killed, t.Name
			if err := os.WriteFile(filepath.Join(j.c.state, "last-kill.log"), out, 0o644); err != nil {
				return err
			}
			return nil
		}
	}
	m.Status = lived
	return nil
}

func readResults(path string) (map[string]mutant, error) {
	done := map[string]mutant{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return done, nil
	}
	if err != nil {
		return nil, err
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var m mutant
		if err := json.Unmarshal(line, &m); err != nil {
			continue // a line cut short by a stopped run
		}
		done[m.key()] = m
	}
	return done, nil
}

// report prints the counts and the survivors and writes the JSON report.
func report(c config, module string, ms []mutant, elapsed time.Duration) error {
	counts := map[string]int{}
	for _, m := range ms {
		counts[m.Status]++
	}
	log.Printf("")
	for _, m := range ms {
		if m.Status == lived {
			log.Printf("LIVED %s at %s/%s (%s→%s)", m.Type, c.target, m.id(), m.From, m.To)
		}
	}
	judged := counts[killed] + counts[lived]
	rate := 0.0
	if judged > 0 {
		rate = 100 * float64(counts[killed]) / float64(judged)
	}
	log.Printf("%d mutants in %s: killed %d, lived %d, timed out %d, not viable %d, not covered %d, not judged yet %d",
		len(ms), elapsed.Round(time.Second), counts[killed], counts[lived], counts[timedOut], counts[notViable],
		counts[notCovered], counts[runnable])
	log.Printf("kill rate: %d/%d = %.1f%% of the mutants judged killed or lived", counts[killed], judged, rate)
	b, err := json.MarshalIndent(map[string]any{
		"go_module": module, "target": c.target, "run": c.run, "packages": c.packages,
		"counts": counts, "kill_rate_percent": rate, "elapsed_seconds": elapsed.Seconds(), "mutants": ms,
	}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(c.output, b, 0o644)
}

func output(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return string(out), nil
}

func combined(dir, name string, args ...string) ([]byte, error) {
	return combinedContext(context.Background(), dir, name, args...)
}

// combinedContext runs a command in its own process group, all of which the context's end kills.
func combinedContext(ctx context.Context, dir, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		return out.Bytes(), err
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if err := <-waited; err != nil {
			return out.Bytes(), errors.Join(ctx.Err(), err)
		}
		return out.Bytes(), ctx.Err()
	}
}

func firstLine(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, ".go:") {
			return strings.TrimSpace(l)
		}
	}
	return strings.TrimSpace(tail(b, 1))
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
