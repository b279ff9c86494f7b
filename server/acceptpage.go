package server

import (
	_ "embed"
	"net/http"
)

// acceptPage is the page an invitation mail links to: it reads the invitation token from the
// address's fragment (which browsers never send to the server, so it reaches no log), posts it
// to POST /api/v1/invitations/accept with the name typed in, and shows the API key once.
//
//go:embed accept.html
var acceptPage []byte

// acceptScriptHash is the SHA-256 of the page's one inline script, for its Content-Security-Policy
// (TestAcceptPage checks it against the page).
const acceptScriptHash = "T3MyrTxPPptTF4CHoIzKciDsbwATSekCE5WPm//SDyQ="

func serveAcceptPage(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'sha256-"+acceptScriptHash+"'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'")
	_, _ = w.Write(acceptPage)
}
