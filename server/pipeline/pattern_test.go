package pipeline

import (
	"encoding/json"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"renga.dev/renga/gen/api"
)

// specPatterns are every pattern in the spec (parameters' and schemas' alike).
func specPatterns(t testing.TB) []string {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && k == "pattern" {
					seen[s] = true
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	return slices.Sorted(maps.Keys(seen)) // in one order: the probes' draws repeat from run to run
}

// patternProbes are strings near the edges of p's simple form (or of nothing, for the others):
// its prefix with too few, enough and too many runes of its class, runes just outside the
// class's ranges, invalid UTF-8, NUL, newlines.
func patternProbes(p *pattern, rng *rand.Rand) []string {
	probes := []string{"", "\x00", "\n", "a", "x", "\xff", "é", "org_", "org_\n"}
	classRune := func() rune {
		if len(p.class) < 2 {
			return 'a'
		}
		i := rng.IntN(len(p.class)/2) * 2
		lo, hi := p.class[i], p.class[i+1]
		if hi > lo+1000 {
			hi = lo + 1000
		}
		return lo + rune(rng.IntN(int(hi-lo+1)))
	}
	edges := []rune{0, 0x1f, 0x20, 0x7e, 0x7f, 0x80, 0xfffd, 0x10ffff}
	for i := 0; i+1 < len(p.class); i += 2 {
		edges = append(edges, p.class[i]-1, p.class[i], p.class[i+1], p.class[i+1]+1)
	}
	lengths := []int{0, 1, 2, 25, 26, 27, 63, 64, 65, 99, 100, 101}
	if p.min > 1 {
		lengths = append(lengths, p.min-1, p.min, p.min+1)
	}
	if p.max > 1 {
		lengths = append(lengths, p.max-1, p.max, p.max+1)
	}
	for _, n := range lengths {
		var b strings.Builder
		for range n {
			b.WriteRune(classRune())
		}
		body := b.String()
		probes = append(probes, body, p.prefix+body, p.prefix+body+"\n", strings.ToUpper(p.prefix)+body)
		if n > 0 {
			for _, e := range edges {
				if e < 0 {
					continue
				}
				at := rng.IntN(n)
				rs := []rune(body)
				rs[at] = e
				probes = append(probes, p.prefix+string(rs))
			}
			probes = append(probes, p.prefix+body[:len(body)-1]+"\xff", p.prefix+"\xc3"+body)
		}
	}
	return probes
}

// TestPatternIsRegexp holds every pattern of the spec, matched without the regexp machine where
// it is simple, to regexp's answer, on strings at the edges of its form.
func TestPatternIsRegexp(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	spec := specPatterns(t)
	simple := 0 // of the spec's
	for i, expr := range append(spec, `^a[bc]?$`, `^[a-z]*$`, `^x[0-9]{2,}$`, `^(?i)org_[a-z]{2}$`, `^[a-z]+x$`) {
		p, err := compilePattern(expr)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		re := regexp.MustCompile(expr)
		if p.simple && i < len(spec) {
			simple++
		} else if !p.simple {
			t.Logf("left to regexp: %s", expr)
		}
		for _, s := range patternProbes(p, rng) {
			if got, want := p.MatchString(s), re.MatchString(s); got != want {
				t.Errorf("%s (simple %v): %q: matched %v, regexp %v", expr, p.simple, s, got, want)
			}
		}
	}
	// The IDs and names the hot paths check are simple: the loop, not the regexp machine.
	for _, expr := range []string{`^org_[0-9a-z]{26}$`, `^ins_[0-9a-z]{26}$`, `^[^\x00-\x1F\x7F]+$`, `^[0-9a-f]{64}$`} {
		if !mustPattern(expr).simple {
			t.Errorf("%s: not matched in its simple form", expr)
		}
	}
	if simple < 15 { // 16 of 23 on 2026-12-06
		t.Errorf("%d of the spec's %d patterns in their simple form", simple, len(spec))
	}
}

// FuzzPatternIsRegexp: for any string, an ID's and a name's pattern answer as regexp does.
func FuzzPatternIsRegexp(f *testing.F) {
	for _, s := range []string{"", "org_0123456789abcdefghijklmnop", "org_\xff", "a\x7f", "é"} {
		f.Add(s)
	}
	exprs := []string{`^org_[0-9a-z]{26}$`, `^[^\x00-\x1F\x7F]+$`, `^[a-z0-9][a-z0-9-]{0,39}$`, `^[\x21\x23-\x5b\x5d-\x7e]{1,100}$`}
	ps := make([]*pattern, len(exprs))
	for i, e := range exprs {
		ps[i] = mustPattern(e)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, p := range ps {
			if got, want := p.MatchString(s), p.re.MatchString(s); got != want {
				t.Errorf("%s: %q: matched %v, regexp %v", p, s, got, want)
			}
		}
	})
}

func BenchmarkPattern(b *testing.B) {
	p := mustPattern(`^org_[0-9a-z]{26}$`)
	id := "org_0123456789abcdefghijklmnop"
	b.Run("simple", func(b *testing.B) {
		for b.Loop() {
			p.MatchString(id)
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for b.Loop() {
			p.re.MatchString(id)
		}
	})
}
