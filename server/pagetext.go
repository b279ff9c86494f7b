package server

import (
	"fmt"
	"html/template"
	"strings"

	"renga.dev/renga/api/textrule"
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
	textrule.Split(s, func(t string) { b.WriteString(template.HTMLEscapeString(t)) },
		func(r rune) { fmt.Fprintf(&b, `<span class="ctl">\u%04X</span>`, r) })
	b.WriteString("</bdi>")
	return template.HTML(b.String()) // escaped text and fixed markup only
}

// plainText is s with every hidden character visible, for a page's title (which the template
// escapes, and which shows no markup).
func plainText(s string) string { return textrule.Escaped(s) }
