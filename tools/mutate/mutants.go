package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/scanner"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

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
func enumerate(c config, cov *coverageSet, module, tmp string) ([]mutant, error) {
	profile := filepath.Join(tmp, "merged.out")
	if err := os.WriteFile(profile, []byte(mergedProfile(cov, module)), 0o644); err != nil {
		return nil, err
	}
	listing := filepath.Join(tmp, "mutants.json")
	args := []string{"unleash", "--dry-run", "--integration", "--coverpkg", "./" + c.target + "/...", "--output", listing}
	excluded, err := excludeFiles(c.target, c.files)
	if err != nil {
		return nil, err
	}
	args = append(args, excluded...)
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
	return parseListing(raw, c.target)
}

// excludeFiles is gremlins' --exclude-files for every Go file of the target (not a test) that is
// not one of files (relative to the target); none when files is empty: every file is mutated.
func excludeFiles(target string, files []string) ([]string, error) {
	if len(files) == 0 {
		return nil, nil
	}
	keep := map[string]bool{}
	for _, f := range files {
		keep[f] = true
	}
	var args []string
	err := filepath.WalkDir(target, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, err := filepath.Rel(target, path)
		if err != nil {
			return err
		}
		if !keep[filepath.ToSlash(rel)] {
			args = append(args, "--exclude-files", "^"+regexp.QuoteMeta(filepath.ToSlash(rel))+"$")
		}
		return nil
	})
	return args, err
}

// parseListing reads gremlins' dry-run report: each mutant, with the token it changes (read
// from the target's file) and what it becomes, in the order of file, line, column and type.
func parseListing(raw []byte, target string) ([]mutant, error) {
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
		src, err := os.ReadFile(filepath.Join(target, f.Name))
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

// mutated is the file's source with the mutant's change made.
func mutated(src []byte, m *mutant) ([]byte, error) {
	off, err := offset(src, m.Line, m.Column)
	if err != nil {
		return nil, err
	}
	return append(append(append([]byte{}, src[:off]...), m.To...), src[off+len(m.From):]...), nil
}
