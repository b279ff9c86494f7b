// Command mutate is make mutate's runner (docs/mutation-testing.md). Gremlins (pinned in go.mod)
// decides which mutants exist: its dry run lists every token it would change in the target's
// files. This program judges them, instead of gremlins' own executor (which copies the module
// and runs every selected test for each mutant):
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
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
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

// grace is added to every test's time limit under a mutant, beyond the coefficient times its
// time without mutants.
const grace = 20 * time.Second

type config struct {
	target      string
	packages    []string
	run         string
	files       []string
	gremlins    string
	state       string
	coefficient float64
	grace       time.Duration
	ldflags     string
	dryRun      bool
	only        map[string]bool
	output      string
}

func main() {
	log.SetFlags(0)
	c, err := parseConfig(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		os.Exit(2) // the flag set has said what is wrong, and the usage
	}
	if err := run(c); err != nil {
		log.Fatal("mutate: ", err)
	}
}

// parseConfig reads the command line.
func parseConfig(args []string) (config, error) {
	c := config{grace: grace}
	var packages, files, only string
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	fs.StringVar(&c.target, "target", "server/domain", "the package directory to mutate (with its subpackages)")
	fs.StringVar(&packages, "packages", "", "the packages whose tests judge a mutant (space-separated; default ./TARGET/...)")
	fs.StringVar(&c.run, "run", ".", "the tests that judge a mutant (a go test -run pattern)")
	fs.StringVar(&files, "files", "", "only these files of the target (space-separated, relative to it)")
	fs.StringVar(&c.gremlins, "gremlins", "bin/gremlins", "the gremlins binary")
	fs.StringVar(&c.state, "state", "bin/mutate", "where coverage and results are kept")
	fs.Float64Var(&c.coefficient, "timeout-coefficient", 3, "a test run longer than this times its baseline is a timed-out mutant")
	fs.StringVar(&c.ldflags, "ldflags", "-s -w", "the linker flags of the mutants' test binaries")
	fs.BoolVar(&c.dryRun, "dry-run", false, "list the mutants and the tests that reach each, test none")
	fs.StringVar(&only, "only", "", "judge only these mutants (space-separated file:line:column, relative to the target), again even if judged")
	fs.StringVar(&c.output, "output", "", "the JSON report (default bin/mutate-<target's base name>.json)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
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
	return c, nil
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
	mutants, err := enumerate(c, cov, module, tmp)
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

	todo := pending(mutants, done, c.only)
	log.Printf("%d mutants: %d to judge (%d already judged on this tree), results in %s", len(mutants), len(todo), len(done), resultsPath)
	j := &judge{c: c, cov: cov, tmp: tmp, built: map[string]string{}}
	s := session{c: c, cov: cov, judge: j.judge, record: func(m *mutant) error { return appendResult(results, m) }}
	if err := s.judgeAll(todo); err != nil {
		return err
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
