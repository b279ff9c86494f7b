package pipeline

import (
	"regexp"
	"regexp/syntax"
)

// pattern is a regular expression of the spec (a path parameter's, a body field's), matched as
// regexp matches it. The spec's patterns are nearly all of one shape, ^prefix[class]{min,max}$
// (an ID such as ^org_[0-9a-z]{26}$, a name such as ^[^\x00-\x1F\x7F]+$): such a pattern is
// matched by a loop over the string's runes, without the regexp machine (an organization's ID:
// 39 against 214 ns, BenchmarkPattern; more under load, in a GET's profile). Any other pattern
// goes to regexp.
type pattern struct {
	re *regexp.Regexp
	// The loop's form, when simple: the literal prefix, then between min and max (-1: no
	// bound) runes of class (sorted inclusive ranges, as syntax gives them), then the end.
	simple   bool
	prefix   string
	class    []rune
	min, max int
}

// compilePattern compiles expr as regexp.Compile does, and finds its simple form if it has one.
func compilePattern(expr string) (*pattern, error) {
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, err
	}
	p := &pattern{re: re}
	if tree, err := syntax.Parse(expr, syntax.Perl); err == nil {
		p.simplify(tree)
	}
	return p, nil
}

// mustPattern is compilePattern for a pattern known to compile.
func mustPattern(expr string) *pattern {
	p, err := compilePattern(expr)
	if err != nil {
		panic(err)
	}
	return p
}

// simplify sets the simple form from tree: a concatenation of the text's beginning, at most one
// literal, one repetition of a character class, and the text's end; else it leaves p to regexp.
func (p *pattern) simplify(t *syntax.Regexp) {
	if t.Op != syntax.OpConcat || len(t.Sub) < 3 {
		return
	}
	subs := t.Sub
	if subs[0].Op != syntax.OpBeginText || subs[len(subs)-1].Op != syntax.OpEndText {
		return
	}
	subs = subs[1 : len(subs)-1]
	prefix := ""
	if subs[0].Op == syntax.OpLiteral {
		if subs[0].Flags&syntax.FoldCase != 0 {
			return
		}
		prefix = string(subs[0].Rune)
		subs = subs[1:]
	}
	if len(subs) != 1 {
		return
	}
	rep := subs[0]
	var min, max int
	switch rep.Op {
	case syntax.OpRepeat:
		min, max = rep.Min, rep.Max
	case syntax.OpPlus:
		min, max = 1, -1
	case syntax.OpStar:
		min, max = 0, -1
	case syntax.OpQuest:
		min, max = 0, 1
	default:
		return
	}
	if len(rep.Sub) != 1 || rep.Sub[0].Op != syntax.OpCharClass || rep.Sub[0].Flags&syntax.FoldCase != 0 {
		return
	}
	p.simple, p.prefix, p.class, p.min, p.max = true, prefix, rep.Sub[0].Rune, min, max
}

// MatchString reports whether s matches the pattern, as regexp's MatchString does.
func (p *pattern) MatchString(s string) bool {
	if !p.simple {
		return p.re.MatchString(s)
	}
	if len(s) < len(p.prefix) || s[:len(p.prefix)] != p.prefix {
		return false
	}
	n := 0
	for _, r := range s[len(p.prefix):] { // an invalid byte is U+FFFD, as regexp reads it
		if !p.inClass(r) {
			return false
		}
		n++
		if p.max >= 0 && n > p.max {
			return false
		}
	}
	return n >= p.min
}

func (p *pattern) inClass(r rune) bool {
	for i := 0; i+1 < len(p.class); i += 2 {
		if r < p.class[i] {
			return false
		}
		if r <= p.class[i+1] {
			return true
		}
	}
	return false
}

// String is the pattern as written.
func (p *pattern) String() string { return p.re.String() }
