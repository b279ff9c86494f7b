package main

import (
	"bytes"
	"context"
	"errors"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	c, err := parseConfig([]string{"-target", "./server/pipeline/", "-run", "^TestA$", "-files", "a.go  b.go",
		"-only", "a.go:3:4 b.go:5:6", "-timeout-coefficient", "2.5", "-dry-run"})
	if err != nil {
		t.Fatal(err)
	}
	if c.target != "server/pipeline" {
		t.Errorf("target %q, want server/pipeline", c.target)
	}
	if !slices.Equal(c.packages, []string{"./server/pipeline/..."}) {
		t.Errorf("packages %q, want the target's own", c.packages)
	}
	if !slices.Equal(c.files, []string{"a.go", "b.go"}) {
		t.Errorf("files %q", c.files)
	}
	if !reflect.DeepEqual(c.only, map[string]bool{"a.go:3:4": true, "b.go:5:6": true}) {
		t.Errorf("only %v", c.only)
	}
	if c.output != filepath.Join("bin", "mutate-pipeline.json") || c.coefficient != 2.5 || !c.dryRun || c.run != "^TestA$" {
		t.Errorf("output %q, coefficient %v, dry run %v, run %q", c.output, c.coefficient, c.dryRun, c.run)
	}
	if c.grace != grace {
		t.Errorf("grace %s, want %s", c.grace, grace)
	}

	c, err = parseConfig([]string{"-packages", "./server/domain/... ./server/apitest", "-output", "x.json"})
	if err != nil {
		t.Fatal(err)
	}
	if c.target != "server/domain" || !slices.Equal(c.packages, []string{"./server/domain/...", "./server/apitest"}) ||
		c.output != "x.json" || len(c.only) != 0 || c.run != "." || c.coefficient != 3 || c.ldflags != "-s -w" {
		t.Errorf("defaults: %+v", c)
	}
	if _, err := parseConfig([]string{"-no-such-flag"}); err == nil {
		t.Error("an unknown flag was accepted")
	}
}

func TestBlockCovers(t *testing.T) {
	multi := block{10, 5, 14, 3} // line 10 column 5 to line 14 column 3
	single := block{20, 8, 20, 30}
	for _, c := range []struct {
		b         block
		line, col int
		want      bool
	}{
		{multi, 12, 1, true},   // a line strictly inside: any column
		{multi, 10, 5, true},   // the first line from its column
		{multi, 10, 99, true},  //
		{multi, 10, 4, false},  // before the block starts
		{multi, 14, 3, true},   // the last line up to its column
		{multi, 14, 4, false},  // after it ends
		{multi, 9, 50, false},  // lines outside
		{multi, 15, 1, false},  //
		{single, 20, 8, true},  // a block of one line: within its columns only
		{single, 20, 30, true}, //
		{single, 20, 7, false}, //
		{single, 20, 31, false},
		{single, 21, 10, false},
	} {
		if got := c.b.covers(c.line, c.col); got != c.want {
			t.Errorf("%v covers %d:%d = %v, want %v", c.b, c.line, c.col, got, c.want)
		}
	}
}

func TestParseProfile(t *testing.T) {
	profile := `mode: set
renga.dev/renga/server/domain/usage.go:133.4,135.5 2 1
renga.dev/renga/server/domain/usage.go:136.2,136.20 1 0
renga.dev/renga/server/domain/purge.go:10.1,12.2 3 4

`
	got, err := parseProfile(strings.NewReader(profile), "renga.dev/renga")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]block{
		"server/domain/usage.go": {{133, 4, 135, 5}}, // the block run 0 times is not reached
		"server/domain/purge.go": {{10, 1, 12, 2}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("blocks %v, want %v", got, want)
	}
	for _, bad := range []string{
		"renga.dev/renga/a.go:1.1,2.2 1\n",      // a field missing
		"renga.dev/renga/a.go 1.1,2.2 1 1\n",    // four fields
		"renga.dev/renga/a.go-1.1,2.2 1 1\n",    // no file and span
		"renga.dev/renga/a.go:1.1-2.2 1 1\n",    // a span unreadable
		"renga.dev/renga/a.go:x.1,2.2 1 1\n",    //
		"mode: set\nrenga.dev/renga/a.go 1 1\n", //
	} {
		if _, err := parseProfile(strings.NewReader(bad), "renga.dev/renga"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestMergedProfileReadsBack(t *testing.T) {
	cov := &coverageSet{Tests: []testCoverage{
		{Name: "TestA", Blocks: map[string][]block{"server/domain/a.go": {{1, 2, 3, 4}}}},
		{Name: "TestB", Blocks: map[string][]block{"server/domain/a.go": {{5, 1, 5, 9}}, "server/domain/b.go": {{7, 1, 8, 2}}}},
	}}
	text := mergedProfile(cov, "renga.dev/renga")
	if !strings.HasPrefix(text, "mode: set\n") {
		t.Fatalf("profile without its mode line:\n%s", text)
	}
	got, err := parseProfile(strings.NewReader(text), "renga.dev/renga")
	if err != nil {
		t.Fatal(err)
	}
	for file, blocks := range got {
		slices.SortFunc(blocks, func(a, b block) int { return a[0] - b[0] })
		got[file] = blocks
	}
	want := map[string][]block{"server/domain/a.go": {{1, 2, 3, 4}, {5, 1, 5, 9}}, "server/domain/b.go": {{7, 1, 8, 2}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged profile read back as %v, want %v\n%s", got, want, text)
	}
}

func TestReaching(t *testing.T) {
	reach := map[string][]block{"server/domain/a.go": {{10, 1, 12, 2}}}
	cov := &coverageSet{Tests: []testCoverage{
		{Name: "TestSlow", Seconds: 5, Passed: true, Blocks: reach},
		{Name: "TestFailing", Seconds: 0.1, Passed: false, Blocks: reach}, // fails without mutants: judges none
		{Name: "TestElsewhere", Seconds: 0.2, Passed: true, Blocks: map[string][]block{"server/domain/b.go": {{10, 1, 12, 2}}}},
		{Name: "TestOtherLines", Seconds: 0.3, Passed: true, Blocks: map[string][]block{"server/domain/a.go": {{1, 1, 9, 2}, {13, 1, 20, 1}}}},
		{Name: "TestFast", Seconds: 1, Passed: true, Blocks: reach},
		{Name: "TestFastToo", Seconds: 1, Passed: true, Blocks: map[string][]block{"server/domain/a.go": {{1, 1, 2, 1}, {11, 1, 11, 40}}}},
	}}
	m := mutant{File: "a.go", Line: 11, Column: 7}
	if got, want := m.testNames(cov, "server/domain"), []string{"TestFast", "TestFastToo", "TestSlow"}; !slices.Equal(got, want) {
		t.Errorf("tests reaching a.go:11:7: %q, want %q (fastest first, equal times in coverage order)", got, want)
	}
	m = mutant{File: "c.go", Line: 11, Column: 7}
	if got := m.testNames(cov, "server/domain"); len(got) != 0 {
		t.Errorf("tests reaching c.go:11:7: %q, want none", got)
	}
}

const source = `package p

func f(a, b int) int {
	for i := 0; i < a; i++ {
		if a >= b && b != 0 {
			break
		}
	}
	return a - -b
}
`

func TestMutation(t *testing.T) {
	for _, c := range []struct {
		typ       string
		line, col int
		from, to  string
	}{
		{"CONDITIONALS_BOUNDARY", 4, 16, "<", "<="},
		{"CONDITIONALS_NEGATION", 4, 16, "<", ">="},
		{"INCREMENT_DECREMENT", 4, 22, "++", "--"},
		{"CONDITIONALS_NEGATION", 5, 8, ">=", "<"},
		{"INVERT_LOGICAL", 5, 13, "&&", "||"},
		{"CONDITIONALS_NEGATION", 5, 18, "!=", "=="},
		{"INVERT_LOOPCTRL", 6, 4, "break", "continue"},
		{"ARITHMETIC_BASE", 9, 11, "-", "+"},
		{"INVERT_NEGATIVES", 9, 13, "-", "+"},
	} {
		m := mutant{File: "p.go", Line: c.line, Column: c.col, Type: c.typ}
		from, to, err := mutation([]byte(source), m)
		if err != nil || from != c.from || to != c.to {
			t.Errorf("%s %s: %q → %q, %v; want %q → %q", m.id(), c.typ, from, to, err, c.from, c.to)
		}
	}
	for _, c := range []struct {
		typ       string
		line, col int
		why       string
	}{
		{"NO_SUCH_TYPE", 4, 16, "unknown mutation type"},
		{"CONDITIONALS_BOUNDARY", 5, 9, "no token starts there"}, // the middle of >=
		{"INVERT_LOGICAL", 4, 16, `does not mutate "<"`},
		{"CONDITIONALS_BOUNDARY", 40, 1, "no line 40"},
		{"CONDITIONALS_BOUNDARY", 11, 1, "no token there"}, // past the last token
	} {
		m := mutant{File: "p.go", Line: c.line, Column: c.col, Type: c.typ}
		if _, _, err := mutation([]byte(source), m); err == nil || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s %s: %v, want an error saying %q", m.id(), c.typ, err, c.why)
		}
	}
}

func TestMutated(t *testing.T) {
	m := &mutant{Line: 5, Column: 8, From: ">=", To: "<"}
	got, err := mutated([]byte(source), m)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(source, "a >= b", "a < b", 1)
	if string(got) != want {
		t.Errorf("mutated source:\n%s\nwant:\n%s", got, want)
	}
	m = &mutant{Line: 9, Column: 13, From: "-", To: "+"}
	if got, _ := mutated([]byte(source), m); !strings.Contains(string(got), "return a - +b\n") {
		t.Errorf("the second - of a - -b mutated:\n%s", got)
	}
}

func TestParseListing(t *testing.T) {
	target := t.TempDir()
	if err := os.MkdirAll(filepath.Join(target, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"p.go", "sub/q.go"} {
		if err := os.WriteFile(filepath.Join(target, name), []byte(source), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Gremlins' dry-run report, as it writes one: files in no order, and fields this ignores.
	listing := `{"go_module": "example.com/m", "files": [
	  {"file_name": "sub/q.go", "mutations": [{"type": "INVERT_LOGICAL", "status": "RUNNABLE", "line": 5, "column": 13}]},
	  {"file_name": "p.go", "mutations": [
	    {"type": "INVERT_NEGATIVES", "status": "RUNNABLE", "line": 9, "column": 13},
	    {"type": "CONDITIONALS_NEGATION", "status": "NOT COVERED", "line": 4, "column": 16},
	    {"type": "CONDITIONALS_BOUNDARY", "status": "RUNNABLE", "line": 4, "column": 16}]}],
	  "mutants_total": 4}`
	ms, err := parseListing([]byte(listing), target)
	if err != nil {
		t.Fatal(err)
	}
	want := []mutant{
		{File: "p.go", Line: 4, Column: 16, Type: "CONDITIONALS_BOUNDARY", From: "<", To: "<=", Status: runnable},
		{File: "p.go", Line: 4, Column: 16, Type: "CONDITIONALS_NEGATION", From: "<", To: ">=", Status: notCovered},
		{File: "p.go", Line: 9, Column: 13, Type: "INVERT_NEGATIVES", From: "-", To: "+", Status: runnable},
		{File: "sub/q.go", Line: 5, Column: 13, Type: "INVERT_LOGICAL", From: "&&", To: "||", Status: runnable},
	}
	if !reflect.DeepEqual(ms, want) {
		t.Errorf("mutants:\n%+v\nwant:\n%+v", ms, want)
	}
	bad := `{"files": [{"file_name": "p.go", "mutations": [{"type": "INVERT_LOGICAL", "status": "RUNNABLE", "line": 4, "column": 16}]}]}`
	if _, err := parseListing([]byte(bad), target); err == nil {
		t.Error("a mutation of a token its type does not change was accepted")
	}
	if _, err := parseListing([]byte(`{"files": [{"file_name": "gone.go", "mutations": []}]}`), target); err == nil {
		t.Error("a file that does not exist was accepted")
	}
}

func TestExcludeFiles(t *testing.T) {
	target := t.TempDir()
	for _, name := range []string{"a.go", "b.go", "a_test.go", "notes.txt", "sub/c.go", "sub/d.go"} {
		path := filepath.Join(target, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := excludeFiles(target, []string{"a.go", "sub/d.go"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"--exclude-files", `^b\.go$`, "--exclude-files", `^sub/c\.go$`}
	if !slices.Equal(got, want) {
		t.Errorf("arguments %q, want %q", got, want)
	}
	if got, err := excludeFiles(target, nil); err != nil || got != nil {
		t.Errorf("no -files: %q, %v; want no argument (every file)", got, err)
	}
}

func TestPending(t *testing.T) {
	ms := func() []mutant {
		return []mutant{
			{File: "a.go", Line: 1, Column: 1, Type: "ARITHMETIC_BASE", Status: runnable},
			{File: "a.go", Line: 2, Column: 1, Type: "ARITHMETIC_BASE", Status: runnable},
			{File: "a.go", Line: 3, Column: 1, Type: "ARITHMETIC_BASE", Status: notCovered},
			{File: "a.go", Line: 4, Column: 1, Type: "ARITHMETIC_BASE", Status: runnable},
		}
	}
	done := map[string]mutant{
		"a.go:1:1 ARITHMETIC_BASE": {File: "a.go", Line: 1, Column: 1, Type: "ARITHMETIC_BASE", Status: killed, Killer: "TestA"},
		"a.go:4:1 ARITHMETIC_BASE": {File: "a.go", Line: 4, Column: 1, Type: "ARITHMETIC_BASE", Status: lived},
	}
	ids := func(todo []*mutant) []string {
		var s []string
		for _, m := range todo {
			s = append(s, m.id())
		}
		return s
	}

	// A run resumed: what was judged keeps its verdict, the rest is judged.
	all := ms()
	if got := ids(pending(all, done, nil)); !slices.Equal(got, []string{"a.go:2:1"}) {
		t.Errorf("resumed run judges %q, want a.go:2:1 only", got)
	}
	if all[0].Status != killed || all[0].Killer != "TestA" || all[3].Status != lived || all[2].Status != notCovered {
		t.Errorf("verdicts not restored: %+v", all)
	}

	// -only judges the mutants it names, again if judged; the others keep what they had.
	all = ms()
	todo := pending(all, done, map[string]bool{"a.go:1:1": true, "a.go:3:1": true})
	if got := ids(todo); !slices.Equal(got, []string{"a.go:1:1"}) {
		t.Errorf("-only judges %q, want a.go:1:1 (a.go:3:1 is not runnable)", got)
	}
	if all[0].Status != runnable || all[1].Status != runnable || all[3].Status != lived {
		t.Errorf("-only: %+v", all)
	}
	todo[0].Status = timedOut
	if all[0].Status != timedOut {
		t.Error("pending returned a copy: a verdict would not reach the report")
	}
}

func TestJudgeAllJudgesAChangeOnce(t *testing.T) {
	m := func(line int, typ, to string) *mutant {
		return &mutant{File: "a.go", Line: line, Column: 9, Type: typ, From: "-", To: to, Status: runnable}
	}
	// Gremlins lists `a - b` twice: ARITHMETIC_BASE and INVERT_NEGATIVES both make it `a + b`.
	todo := []*mutant{m(1, "ARITHMETIC_BASE", "+"), m(1, "INVERT_NEGATIVES", "+"), m(2, "ARITHMETIC_BASE", "+")}
	var judged []string
	var results bytes.Buffer
	s := session{c: config{target: "t"}, cov: &coverageSet{},
		judge: func(m *mutant) error {
			judged = append(judged, m.key())
			m.Status, m.Killer = killed, "TestK"
			return nil
		},
		record: func(m *mutant) error { return appendResult(&results, m) },
	}
	var printed bytes.Buffer
	log.SetOutput(&printed)
	defer log.SetOutput(os.Stderr)
	if err := s.judgeAll(todo); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[1/3]       KILLED ARITHMETIC_BASE at a.go:1:9 (-→+) by TestK", "[3/3]"} {
		if !strings.Contains(printed.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, printed.String())
		}
	}
	if want := []string{"a.go:1:9 ARITHMETIC_BASE", "a.go:2:9 ARITHMETIC_BASE"}; !slices.Equal(judged, want) {
		t.Errorf("judged %q, want %q", judged, want)
	}
	if second := todo[1]; second.Status != killed || second.Killer != "TestK" || second.Note != "the same change as ARITHMETIC_BASE" {
		t.Errorf("the second listing of a change: %+v", second)
	}
	if n := strings.Count(results.String(), "\n"); n != 3 {
		t.Errorf("%d verdicts recorded, want 3:\n%s", n, results.String())
	}

	// A dry run judges and records nothing.
	judged, results = nil, bytes.Buffer{}
	s.c.dryRun = true
	if err := s.judgeAll([]*mutant{m(3, "ARITHMETIC_BASE", "+")}); err != nil || len(judged) != 0 || results.Len() != 0 {
		t.Errorf("dry run: %v, judged %q, recorded %q", err, judged, results.String())
	}

	// A failure to judge or to record ends the run.
	s.c.dryRun = false
	failed := errors.New("disk full")
	s.record = func(*mutant) error { return failed }
	if err := s.judgeAll([]*mutant{m(4, "ARITHMETIC_BASE", "+")}); !errors.Is(err, failed) {
		t.Errorf("a failed record: %v", err)
	}
}

func TestResultsResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.jsonl")
	done, err := readResults(path)
	if err != nil || len(done) != 0 {
		t.Fatalf("no results file: %v, %v", done, err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	first := mutant{File: "a.go", Line: 1, Column: 2, Type: "ARITHMETIC_BASE", From: "+", To: "-", Status: killed,
		Killer: "TestA", Tests: 2, Build: 1.5, Run: 0.5}
	again := mutant{File: "a.go", Line: 1, Column: 2, Type: "ARITHMETIC_BASE", From: "+", To: "-", Status: lived, Tests: 3}
	other := mutant{File: "b.go", Line: 3, Column: 4, Type: "INVERT_LOGICAL", From: "&&", To: "||", Status: timedOut, Killer: "TestB"}
	for _, m := range []mutant{first, other, again} {
		if err := appendResult(f, &m); err != nil {
			t.Fatal(err)
		}
	}
	// A run stopped while writing a line leaves it cut short.
	if _, err := f.WriteString(`{"file": "c.go", "line": 5, "col`); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	done, err = readResults(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]mutant{again.key(): again, other.key(): other} // the latest verdict of a mutant wins
	if !reflect.DeepEqual(done, want) {
		t.Errorf("results read back:\n%+v\nwant:\n%+v", done, want)
	}
}

func TestTimeLimitAndOutcome(t *testing.T) {
	if got, want := testLimit(3, 20*time.Second, 2.5), 27500*time.Millisecond; got != want {
		t.Errorf("limit of a 2.5 s test at coefficient 3: %s, want %s", got, want)
	}
	if got := testLimit(3, 20*time.Second, 0); got != 20*time.Second {
		t.Errorf("limit of an instant test: %s, want the grace alone", got)
	}
	exit := errors.New("exit status 1")
	for _, c := range []struct {
		limit, err error
		want       string
	}{
		{nil, nil, ""},
		{nil, exit, killed},
		// The limit's end kills the test, which then fails too: a hang, not an assertion.
		{context.DeadlineExceeded, errors.Join(context.DeadlineExceeded, exit), timedOut},
		{context.DeadlineExceeded, nil, timedOut},
	} {
		if got := outcome(c.limit, c.err); got != c.want {
			t.Errorf("outcome(%v, %v) = %q, want %q", c.limit, c.err, got, c.want)
		}
	}
}

func TestReport(t *testing.T) {
	ms := []mutant{{Status: killed}, {Status: killed}, {Status: killed}, {Status: lived},
		{Status: timedOut}, {Status: notViable}, {Status: notCovered}, {Status: runnable}}
	n := counts(ms)
	if n[killed] != 3 || n[lived] != 1 || n[timedOut] != 1 || n[runnable] != 1 {
		t.Errorf("counts %v", n)
	}
	if got := killRate(n); got != 75 {
		t.Errorf("kill rate %v, want 75 (timed out, not viable and not covered count in neither)", got)
	}
	if got := killRate(counts([]mutant{{Status: notCovered}})); got != 0 {
		t.Errorf("kill rate with nothing judged: %v", got)
	}
	ms[3] = mutant{File: "a.go", Line: 7, Column: 9, Type: "ARITHMETIC_BASE", From: "+", To: "-", Status: lived}
	out := filepath.Join(t.TempDir(), "report.json")
	var printed bytes.Buffer
	log.SetOutput(&printed)
	defer log.SetOutput(os.Stderr)
	if err := report(config{target: "server/domain", output: out}, "renga.dev/renga", ms, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"LIVED ARITHMETIC_BASE at server/domain/a.go:7:9 (+→-)\n", // each survivor named
		"8 mutants in 1m0s: killed 3, lived 1, timed out 1, not viable 1, not covered 1, not judged yet 1\n",
		"kill rate: 3/4 = 75.0% of the mutants judged killed or lived\n",
	} {
		if !strings.Contains(printed.String(), want) {
			t.Errorf("the summary does not say %q:\n%s", want, printed.String())
		}
	}
	if strings.Count(printed.String(), "LIVED") != 1 {
		t.Errorf("only the survivor is listed:\n%s", printed.String())
	}
	b, err := os.ReadFile(out)
	if err != nil || !bytes.Contains(b, []byte(`"kill_rate_percent": 75`)) || !bytes.Contains(b, []byte(`"KILLED": 3`)) {
		t.Errorf("report: %v\n%s", err, b)
	}
}

func TestFirstLineAndTail(t *testing.T) {
	build := []byte("# example.com/m/lib\nlib/lib.go:12:20: invalid operation: operator - not defined on \"hello \" (untyped string constant)\nlib/lib.go:13:1: other\n")
	if got := firstLine(build); got != `lib/lib.go:12:20: invalid operation: operator - not defined on "hello " (untyped string constant)` {
		t.Errorf("firstLine: %q", got)
	}
	if got := firstLine([]byte("go: cannot find main module\nsecond\n")); got != "second" {
		t.Errorf("firstLine without a position: %q, want the last line", got)
	}
	if got := tail([]byte("a\nb\nc\n"), 2); got != "b\nc" {
		t.Errorf("tail: %q", got)
	}
	if got := tail([]byte("a\n"), 5); got != "a" {
		t.Errorf("tail of a short output: %q", got)
	}
}

// The context's end kills the command's whole process group: a test binary's children too,
// which would otherwise hold its output open, and the run with it.
func TestCombinedContextKillsTheProcessGroup(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		// Cancelled once the child that holds the output open has started.
		for ctx.Err() == nil {
			if _, err := os.Stat(ready); err == nil {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	_, err := combinedContext(ctx, ".", "sh", "-c", `sleep 1000 & touch "$0"; wait`, ready)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want the context's", err)
	}

	out, err := combined(".", "sh", "-c", "echo out; echo err >&2; exit 3")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || string(out) != "out\nerr\n" {
		t.Errorf("combined: %q, %v", out, err)
	}
}

// tools/mutate/go is the go command gremlins runs: it answers the coverage step with the
// profile already made, and passes every other command to the real go.
func TestGoWrapper(t *testing.T) {
	dir := t.TempDir()
	merged := filepath.Join(dir, "merged.out")
	if err := os.WriteFile(merged, []byte("mode: set\nexample.com/m/a.go:1.1,2.2 1 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "go")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"real go: $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(env []string, args ...string) (string, error) {
		cmd := exec.Command("./go", args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	env := []string{"MUTATE_GO=" + fake, "MUTATE_COVERPROFILE=" + merged}
	asked := filepath.Join(dir, "asked.out")
	if out, err := run(env, "test", "-cover", "-coverprofile", asked, "./..."); err != nil || out != "" {
		t.Fatalf("go test -coverprofile: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(asked); err != nil || !strings.Contains(string(b), "a.go:1.1,2.2") {
		t.Errorf("the profile given to gremlins: %q, %v", b, err)
	}
	if out, err := run(env, "list", "-m"); err != nil || out != "real go: list -m\n" {
		t.Errorf("go list -m: %q, %v; want the real go's answer", out, err)
	}
	if out, err := run(env, "test", "./..."); err == nil {
		t.Errorf("go test without -coverprofile succeeded: %q", out)
	}
	if out, err := run([]string{"MUTATE_COVERPROFILE=" + merged}, "version"); err == nil {
		t.Errorf("without MUTATE_GO: %q, want a failure", out)
	}
}
