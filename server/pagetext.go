package server

import (
	"fmt"
	"html/template"
	"strings"
	"unicode/utf8"
)

// Stored text on the deployment's pages. The API refuses invisible and direction-changing
// characters in names people read (openapi.yaml's one pattern for them), but text stored before
// that rule, text an import brought, and free-form data (an observation's, kept as sent) may
// still hold them. A page shows such text with shownText: isolated in <bdi>, so that its
// direction cannot reorder the rest of the line, and with each of those characters shown as its
// JSON escape (\u202E), marked, so that nothing in it is invisible.

// pageFuncs are the template functions of every page that shows stored text: text in an
// element's content, plain where no markup can be (a <title>).
var pageFuncs = template.FuncMap{"text": shownText, "plain": plainText}

// shownText is s for an HTML page: escaped, isolated, every hidden character visible.
func shownText(s string) template.HTML {
	var b strings.Builder
	b.WriteString("<bdi>")
	split(s, func(t string) { b.WriteString(template.HTMLEscapeString(t)) },
		func(r rune) { fmt.Fprintf(&b, `<span class="ctl">\u%04X</span>`, r) })
	b.WriteString("</bdi>")
	return template.HTML(b.String()) // escaped text and fixed markup only
}

// plainText is s with every hidden character visible, for a page's title (which the template
// escapes, and which shows no markup).
func plainText(s string) string {
	var b strings.Builder
	split(s, func(t string) { b.WriteString(t) }, func(r rune) { fmt.Fprintf(&b, `\u%04X`, r) })
	return b.String()
}

// split calls text with each run of s without hidden characters and hidden with each hidden
// character, in order.
func split(s string, text func(string), hidden func(rune)) {
	start := 0
	for i, r := range s {
		if !hiddenRune(r) {
			continue
		}
		text(s[start:i])
		hidden(r)
		start = i + utf8.RuneLen(r)
	}
	text(s[start:])
}

// hiddenRune reports whether r is one of the characters openapi.yaml's pattern for names people
// read refuses (TestHiddenRunesAreTheSpecs holds the two to the same set): C0 and C1 controls and
// DEL; bidirectional controls and marks; zero-width, invisible and deprecated format characters,
// fillers that show as nothing, and the byte-order mark; line and paragraph separators.
func hiddenRune(r rune) bool {
	switch {
	case r <= 0x1F || (r >= 0x7F && r <= 0x9F):
		return true
	case r >= 0x200B && r <= 0x200F, r >= 0x2028 && r <= 0x202E, r >= 0x2060 && r <= 0x206F,
		r >= 0xFFF9 && r <= 0xFFFB:
		return true
	}
	switch r {
	case 0x00AD, 0x034F, 0x061C, 0x115F, 0x1160, 0x180E, 0x3164, 0xFEFF, 0xFFA0:
		return true
	}
	return false
}
