package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// pending gives each mutant the verdict already reached for it on this tree (done, by key) and
// returns those left to judge, in order. With -only (only not empty) these are exactly the
// runnable mutants it names, judged again even if judged; otherwise every runnable one not yet
// judged.
func pending(ms []mutant, done map[string]mutant, only map[string]bool) []*mutant {
	var todo []*mutant
	for i := range ms {
		m := &ms[i]
		if m.Status != runnable {
			continue
		}
		d, judged := done[m.key()]
		switch {
		case len(only) > 0 && !only[m.id()], len(only) == 0 && judged:
			if judged {
				*m = d
			}
		default:
			todo = append(todo, m)
		}
	}
	return todo
}

// session judges the mutants of one run.
type session struct {
	c      config
	cov    *coverageSet
	judge  func(*mutant) error // gives the mutant its verdict
	record func(*mutant) error // keeps a verdict once reached
}

// judgeAll judges each mutant, or with -dry-run lists it and the tests that reach it. A change
// already judged in this run (gremlins lists `a - b` twice, as two types) gets that verdict
// without being built again.
func (s *session) judgeAll(todo []*mutant) error {
	verdicts := map[string]mutant{}
	for n, m := range todo {
		if s.c.dryRun {
			log.Printf("%s %s %s→%s: %s", m.id(), m.Type, m.From, m.To, strings.Join(m.testNames(s.cov, s.c.target), " "))
			continue
		}
		if v, ok := verdicts[m.change()]; ok {
			m.Status, m.Killer, m.Note = v.Status, v.Killer, "the same change as "+v.Type
		} else {
			if err := s.judge(m); err != nil {
				return err
			}
			verdicts[m.change()] = *m
		}
		if err := s.record(m); err != nil {
			return err
		}
		log.Printf("[%d/%d] %12s %s at %s (%s→%s) %s", n+1, len(todo), m.Status, m.Type, m.id(), m.From, m.To, m.detail())
	}
	return nil
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
	dir := filepath.Join(j.tmp, "mutant")
	overlay, err := writeOverlay(dir, filepath.Join(j.c.target, m.File), m)
	if err != nil {
		return err
	}
	clear(j.built)
	for _, t := range tests {
		bin, ok := j.built[t.Package]
		if !ok {
			bin = filepath.Join(dir, strings.ReplaceAll(t.Package, "/", "_")+".test")
			t0 := time.Now()
			out, err := combined(".", "go", "test", "-c", "-vet=off", "-overlay", overlay, "-ldflags", j.c.ldflags, "-o", bin, t.Package)
			m.Build += time.Since(t0).Seconds()
			if err != nil {
				m.Status, m.Note = notViable, "does not compile: "+firstLine(out)
				return nil
			}
			j.built[t.Package] = bin
		}
		limit := testLimit(j.c.coefficient, j.c.grace, t.Seconds)
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		t0 := time.Now()
		out, err := combinedContext(ctx, t.Dir, bin, "-test.run", "^"+t.Name+"$", "-test.count=1", "-test.failfast",
			"-test.timeout", (limit + 10*time.Second).String())
		m.Run += time.Since(t0).Seconds()
		m.Tests++
		status := outcome(ctx.Err(), err)
		cancel()
		if status == "" {
			continue
		}
		m.Status, m.Killer = status, t.Name
		if status == killed {
			return os.WriteFile(filepath.Join(j.c.state, "last-kill.log"), out, 0o644)
		}
		return nil
	}
	m.Status = lived
	return nil
}

// writeOverlay writes the mutated copy of the file at path into dir, and the go build overlay
// that replaces the file with it; it returns the overlay's path.
func writeOverlay(dir, path string, m *mutant) (string, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	changed, err := mutated(src, m)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	file := filepath.Join(dir, filepath.Base(path))
	if err := os.WriteFile(file, changed, 0o644); err != nil {
		return "", err
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {abs: file}})
	if err != nil {
		return "", err
	}
	overlayPath := filepath.Join(dir, "overlay.json")
	return overlayPath, os.WriteFile(overlayPath, overlay, 0o644)
}

// testLimit is how long a test may run under a mutant: coefficient times its time without
// mutants, plus grace. Past it the mutant is timed out.
func testLimit(coefficient float64, grace time.Duration, seconds float64) time.Duration {
	return time.Duration(coefficient*seconds*float64(time.Second)) + grace
}

// outcome is what one test's run says of a mutant: timed out when its time limit ended it
// (limit, the limit's context error), killed when it failed, "" when it passed.
func outcome(limit, err error) string {
	switch {
	case limit != nil:
		return timedOut
	case err != nil:
		return killed
	}
	return ""
}

// appendResult adds a verdict to the results file, one JSON line.
func appendResult(w io.Writer, m *mutant) error {
	line, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = w.Write(append(line, '\n'))
	return err
}

// readResults reads the verdicts a run on this tree already reached, by mutant key; a line a
// stopped run cut short is left out, its mutant judged again.
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
