package textrule

import (
	"testing"

	"renga.dev/renga/gen/api"
)

// TestHiddenIsTheSpecs: the characters shown as escapes are exactly those openapi.yaml's
// pattern for names people read refuses (as the server's validator compiles it), all of Unicode
// through.
// Fails when: either changes alone ("U+202E: the pattern refuses it true, Hidden false").
func TestHiddenIsTheSpecs(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	name := spec.Components.Schemas["DisplayName"].Value
	for r := rune(0); r <= 0x10FFFF; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		if refused := name.VisitJSON("a"+string(r)+"b") != nil; refused != Hidden(r) {
			t.Errorf("U+%04X: the pattern refuses it %v, Hidden %v", r, refused, Hidden(r))
		}
	}
}

// TestEscaped: each hidden character is its escape, in place; other text, right-to-left
// scripts included, is left as it is.
func TestEscaped(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "",
		"Café 東京 🚀":                "Café 東京 🚀",
		"web\u202e1gnp.exe":        `web\u202E1gnp.exe`,
		"\ufeffa\u0085\u200b":      `\uFEFFa\u0085\u200B`,
		"a\tb\nc\x1b[31m":          `a\u0009b\u000Ac\u001B[31m`,
		"\u0635\u0628\u0627\u062d": "\u0635\u0628\u0627\u062d",
	} {
		if got := Escaped(in); got != want {
			t.Errorf("Escaped(%q) = %s, want %s", in, got, want)
		}
	}
}
