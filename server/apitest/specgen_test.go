package apitest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp/syntax"
	"slices"
	"strings"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
)

// specGen makes values from the spec's schemas: valid ones (every constraint the schema states
// is met) and invalid ones (one constraint broken). The fuzzer (fuzz_test.go) sends both.
type specGen struct {
	r *rand.Rand
}

func (g *specGen) chance(p float64) bool { return g.r.Float64() < p }

// valid is a value the schema accepts.
func (g *specGen) valid(ref *openapi3.SchemaRef, depth int) any {
	if ref == nil || ref.Value == nil {
		return map[string]any{}
	}
	s := ref.Value
	if len(s.AllOf) > 0 {
		return g.valid(s.AllOf[0], depth)
	}
	if len(s.OneOf) > 0 {
		return g.valid(s.OneOf[g.r.IntN(len(s.OneOf))], depth)
	}
	if len(s.AnyOf) > 0 {
		return g.valid(s.AnyOf[g.r.IntN(len(s.AnyOf))], depth)
	}
	if s.Nullable && g.chance(0.1) {
		return nil
	}
	if len(s.Enum) > 0 {
		return s.Enum[g.r.IntN(len(s.Enum))]
	}
	switch {
	case s.Type.Is("string"):
		return g.validString(s)
	case s.Type.Is("integer"):
		return g.validInt(s)
	case s.Type.Is("number"):
		return float64(g.validInt(s)) + g.r.Float64()
	case s.Type.Is("boolean"):
		return g.chance(0.5)
	case s.Type.Is("array"):
		n := int(s.MinItems)
		hi := n + 3
		if s.MaxItems != nil && int(*s.MaxItems) < hi {
			hi = int(*s.MaxItems)
		}
		if hi > n {
			n += g.r.IntN(hi - n + 1)
		}
		out := make([]any, 0, n)
		for range n {
			v := g.valid(s.Items, depth+1)
			if s.UniqueItems && slices.ContainsFunc(out, func(x any) bool { return fmt.Sprint(x) == fmt.Sprint(v) }) {
				continue
			}
			out = append(out, v)
		}
		if len(out) < int(s.MinItems) { // unique items that collided: one more try each
			for len(out) < int(s.MinItems) {
				out = append(out, g.valid(s.Items, depth+1))
			}
		}
		return out
	}
	// An object (or a schema without a type: free-form).
	out := map[string]any{}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := s.Properties[name]
		if p.Value != nil && p.Value.ReadOnly {
			continue
		}
		if slices.Contains(s.Required, name) || (depth < 4 && g.chance(0.5)) {
			out[name] = g.valid(p, depth+1)
		}
	}
	if len(s.Properties) == 0 && (s.AdditionalProperties.Has == nil || *s.AdditionalProperties.Has) && g.chance(0.5) {
		out["k"+fmt.Sprint(g.r.IntN(100))] = g.anyJSON(depth + 1)
	}
	return out
}

// anyJSON is a free-form JSON value.
func (g *specGen) anyJSON(depth int) any {
	switch n := g.r.IntN(6); {
	case n == 0 && depth < 3:
		return map[string]any{"nested": g.anyJSON(depth + 1), "n": g.r.IntN(1000)}
	case n == 1 && depth < 3:
		return []any{g.anyJSON(depth + 1), "x"}
	case n == 2:
		return g.r.Float64() * 1e6
	case n == 3:
		return g.chance(0.5)
	case n == 4:
		return nil
	}
	return g.text(1, 20)
}

func (g *specGen) validInt(s *openapi3.Schema) int64 {
	lo, hi := int64(-1000), int64(1000)
	if s.Min != nil {
		lo = int64(*s.Min)
		if s.ExclusiveMin.IsTrue() {
			lo++
		}
		if hi < lo {
			hi = lo + 1000
		}
	}
	if s.Max != nil {
		hi = int64(math.Min(*s.Max, float64(math.MaxInt64/2)))
		if s.ExclusiveMax.IsTrue() {
			hi--
		}
		if lo > hi {
			lo = hi - 1000
		}
	}
	switch {
	case g.chance(0.15):
		return lo
	case g.chance(0.15):
		return hi
	}
	span := hi - lo
	if span > 1_000_000 {
		span = 1_000_000
	}
	return lo + g.r.Int64N(span+1)
}

func (g *specGen) validString(s *openapi3.Schema) string {
	minLen := int(s.MinLength)
	maxLen := minLen + 24
	if s.MaxLength != nil && int(*s.MaxLength) < maxLen {
		maxLen = int(*s.MaxLength)
	}
	switch s.Format {
	case "date-time":
		return g.dateTime()
	case "date":
		return time.Now().UTC().AddDate(0, 0, -g.r.IntN(60)).Format("2006-01-02")
	case "email":
		return fmt.Sprintf("fuzz%d@example.com", g.r.IntN(1_000_000))
	case "uri":
		return fmt.Sprintf("https://fuzz%d.example.com/p", g.r.IntN(1000))
	}
	if s.Pattern != "" {
		if v, ok := g.fromPattern(s.Pattern, minLen, maxLen); ok {
			return v
		}
	}
	return g.text(max(minLen, 1), max(maxLen, 1))
}

// dateTime is an RFC 3339 time: mostly in the last thousand hours, in UTC; sometimes with any
// offset RFC 3339 allows (to ±23:59, where PostgreSQL's timestamptz input reads ±15:59), with
// fractional seconds (to nanoseconds), or at either end of years 1..9999 (in its offset: an
// instant of year 0 or 10000 in UTC).
func (g *specGen) dateTime() string {
	t := time.Now().UTC().Add(-time.Duration(g.r.IntN(1000)) * time.Hour)
	switch {
	case g.chance(0.05):
		t = time.Date(1, 1, 1, g.r.IntN(24), g.r.IntN(60), 0, 0, time.UTC)
	case g.chance(0.05):
		t = time.Date(9999, 12, 31, g.r.IntN(24), g.r.IntN(60), 59, 0, time.UTC)
	}
	layout := time.RFC3339
	if g.chance(0.2) {
		t, layout = t.Add(time.Duration(g.r.IntN(1e9))), time.RFC3339Nano
	}
	if g.chance(0.3) {
		offset := (g.r.IntN(24)*60 + g.r.IntN(60)) * 60
		if g.chance(0.5) {
			offset = -offset
		}
		// The same wall clock in that offset (at the ends of the years, a different instant).
		t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.FixedZone("", offset))
	}
	return t.Format(layout)
}

// text is printable text, sometimes beyond ASCII.
func (g *specGen) text(minLen, maxLen int) string {
	n := minLen
	if maxLen > minLen {
		n += g.r.IntN(maxLen - minLen + 1)
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-_ .ÄéЖ漢"
	runes := []rune(alphabet)
	var b strings.Builder
	for range n {
		b.WriteRune(runes[g.r.IntN(len(runes))])
	}
	return b.String()
}

// fromPattern is a string the regular expression matches, with a length in [minLen, maxLen]
// when it can find one in a few tries.
func (g *specGen) fromPattern(pattern string, minLen, maxLen int) (string, bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return "", false
	}
	re = re.Simplify()
	for range 20 {
		var b strings.Builder
		g.emit(&b, re)
		if n := len([]rune(b.String())); n >= minLen && (maxLen < minLen || n <= maxLen) {
			return b.String(), true
		}
	}
	return "", false
}

func (g *specGen) emit(b *strings.Builder, re *syntax.Regexp) {
	switch re.Op {
	case syntax.OpLiteral:
		b.WriteString(string(re.Rune))
	case syntax.OpCharClass:
		// Pairs of ranges; pick one range, then a rune in it (printable ranges preferred).
		n := len(re.Rune) / 2
		if n == 0 {
			return
		}
		i := g.r.IntN(n)
		lo, hi := re.Rune[2*i], re.Rune[2*i+1]
		if hi > lo+0x7f {
			hi = lo + 0x7f
		}
		b.WriteRune(lo + rune(g.r.IntN(int(hi-lo)+1)))
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		b.WriteByte(byte('a' + g.r.IntN(26)))
	case syntax.OpCapture:
		g.emit(b, re.Sub[0])
	case syntax.OpConcat:
		for _, sub := range re.Sub {
			g.emit(b, sub)
		}
	case syntax.OpAlternate:
		g.emit(b, re.Sub[g.r.IntN(len(re.Sub))])
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := re.Min, re.Max
		switch re.Op {
		case syntax.OpStar:
			lo, hi = 0, 6
		case syntax.OpPlus:
			lo, hi = 1, 6
		case syntax.OpQuest:
			lo, hi = 0, 1
		}
		if hi < 0 {
			hi = lo + 6
		}
		if hi > lo+12 {
			hi = lo + 12
		}
		for range lo + g.r.IntN(hi-lo+1) {
			g.emit(b, re.Sub[0])
		}
	}
}

// invalid breaks one constraint of the schema in v (or replaces v by a value of another kind);
// what it breaks is returned for the report.
func (g *specGen) invalid(ref *openapi3.SchemaRef, v any) (any, string) {
	s := &openapi3.Schema{}
	if ref != nil && ref.Value != nil {
		s = ref.Value
	}
	if obj, ok := v.(map[string]any); ok && len(s.Properties) > 0 && g.chance(0.7) {
		out := map[string]any{}
		for k, x := range obj {
			out[k] = x
		}
		names := make([]string, 0, len(s.Properties))
		for name := range s.Properties {
			names = append(names, name)
		}
		slices.Sort(names)
		name := names[g.r.IntN(len(names))]
		switch g.r.IntN(4) {
		case 0:
			if len(s.Required) > 0 {
				r := s.Required[g.r.IntN(len(s.Required))]
				delete(out, r)
				return out, "without required " + r
			}
			fallthrough
		case 1:
			out["unknown_"+fmt.Sprint(g.r.IntN(10))] = 1
			return out, "an unknown member"
		default:
			inner, what := g.invalid(s.Properties[name], out[name])
			out[name] = inner
			return out, name + ": " + what
		}
	}
	switch g.r.IntN(10) {
	case 0:
		return nil, "null"
	case 1:
		return []any{1, "two"}, "an array"
	case 2:
		return map[string]any{"x": 1}, "an object"
	case 3:
		return "\u0000\u202e\ufeff" + g.text(1, 5), "control characters"
	case 4:
		return strings.Repeat("x", 5000), "a long string"
	case 5:
		return 1e300, "a huge number"
	case 6:
		return -9223372036854775808, "the smallest int64"
	case 7:
		return 3.5, "a fraction"
	case 8:
		return true, "a boolean"
	}
	return "2026-13-45T99:99:99Z", "a malformed time"
}
