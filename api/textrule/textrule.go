// Package textrule is openapi.yaml's rule for names people read, for what shows text: the
// characters its one pattern refuses (controls, bidirectional controls and marks, zero-width and
// other invisible format characters, fillers, the byte-order mark, line and paragraph
// separators). Text stored before the rule, imported, or free-form (an observation's data) may
// hold them; whatever shows such text shows each as its escape (\u202E), so nothing in it is
// invisible or reorders what follows.
package textrule

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Hidden reports whether r is one of the characters the pattern refuses (TestHiddenIsTheSpecs
// holds the two to the same set).
func Hidden(r rune) bool {
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

// Split calls text with each run of s without hidden characters and hidden with each hidden
// character, in order.
func Split(s string, text func(string), hidden func(rune)) {
	start := 0
	for i, r := range s {
		if !Hidden(r) {
			continue
		}
		text(s[start:i])
		hidden(r)
		start = i + utf8.RuneLen(r)
	}
	text(s[start:])
}

// Escaped is s with each hidden character written as its escape, \u followed by four or more
// upper-case hex digits.
func Escaped(s string) string {
	if !strings.ContainsFunc(s, Hidden) {
		return s
	}
	var b strings.Builder
	Split(s, func(t string) { b.WriteString(t) }, func(r rune) { fmt.Fprintf(&b, `\u%04X`, r) })
	return b.String()
}
