package server

import (
	"strings"
	"testing"

	"renga.dev/renga/gen/api"
)

// TestAcceptPageHidesTheSpecsCharacters: the invitation page's script shows as escapes the
// characters of openapi.yaml's pattern for names people read (its class is the pattern's, which
// ECMA-262 reads as the validator does); the pages rendered by the server use textrule, held to
// the same pattern by its own test.
func TestAcceptPageHidesTheSpecsCharacters(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	name := spec.Components.Schemas["DisplayName"].Value
	class, ok := strings.CutPrefix(name.Pattern, "^[^")
	class, ok2 := strings.CutSuffix(class, "]+$")
	if !ok || !ok2 {
		t.Fatalf("DisplayName's pattern %s is not ^[^...]+$", name.Pattern)
	}
	if !strings.Contains(string(acceptPage), "/["+class+"]/g") {
		t.Errorf("the invitation page does not show the characters of %s", name.Pattern)
	}
}

// TestShownText: stored text on a page is escaped and isolated, and each hidden character is
// its marked escape, in place.
func TestShownText(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "<bdi></bdi>",
		"Acme":                     "<bdi>Acme</bdi>",
		"<b>&'\"":                  "<bdi>&lt;b&gt;&amp;&#39;&#34;</bdi>",
		"Café 東京 🚀":                "<bdi>Café 東京 🚀</bdi>",
		"web\u202e1gnp.exe":        `<bdi>web<span class="ctl">\u202E</span>1gnp.exe</bdi>`,
		"\ufeffa\u0085\u200b":      `<bdi><span class="ctl">\uFEFF</span>a<span class="ctl">\u0085</span><span class="ctl">\u200B</span></bdi>`,
		"x\x01<\u2066y\u2069>":     `<bdi>x<span class="ctl">\u0001</span>&lt;<span class="ctl">\u2066</span>y<span class="ctl">\u2069</span>&gt;</bdi>`,
		"\u0635\u0628\u0627\u062d": "<bdi>\u0635\u0628\u0627\u062d</bdi>", // right-to-left text itself stays
	} {
		if got := string(shownText(in)); got != want {
			t.Errorf("shownText(%q) = %s, want %s", in, got, want)
		}
	}
	if got := plainText("Acme\u202eZ<"); got != `Acme\u202EZ<` {
		t.Errorf("plainText = %q", got)
	}
}
