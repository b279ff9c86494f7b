package server

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
)

// singleHeader reports whether the request carries exactly one value of header name.
func singleHeader(r *http.Request, name string) bool { return len(r.Header.Values(name)) == 1 }

// SignatureSkew is how far a signed request's timestamp may be from the server's clock.
const SignatureSkew = 5 * time.Minute

// authenticateIntakeKey checks an intake key by the SHA-256 of the key without its deployment
// identifier: the identifier is never consulted, so a wrong or missing one still authenticates,
// and the right one with a wrong secret does not.
func (s *Server) authenticateIntakeKey(ctx context.Context, r *http.Request) (Actor, bool) {
	if !singleHeader(r, "Authorization") {
		return Actor{}, false
	}
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	key = strings.TrimSpace(key)
	if !ok || !strings.EqualFold(scheme, "Bearer") || !domain.LooksLikeIntakeKey(key) {
		return Actor{}, false
	}
	hash := domain.HashIntakeKey(key)
	keyID, stored, org, err := domain.IntakeKeyHolder(ctx, s.pool, hash)
	if err != nil {
		if !errors.Is(err, db.ErrNotFound) {
			s.log.ErrorContext(ctx, "intake key lookup failed", "error", err)
		}
		return Actor{}, false
	}
	if subtle.ConstantTimeCompare(stored, hash) != 1 {
		return Actor{}, false
	}
	return Actor{Type: domain.ActorIntakeKey, ID: keyID, Name: "intake key " + keyID, CredentialID: keyID,
		OrganizationID: org.ID, OrganizationName: org.Name, OrganizationState: org.State}, true
}

var installationIDPattern = regexp.MustCompile(`^ins_[0-9a-z]{26}$`)

// StringToSign is what an installation signs (see the installationSignature security scheme in
// openapi.yaml): six lines joined by "\n".
func StringToSign(method, requestTarget, timestamp, installationID string, body []byte) string {
	digest := sha256.Sum256(body)
	return strings.Join([]string{"renga-request-v1", method, requestTarget, timestamp, installationID, hex.EncodeToString(digest[:])}, "\n")
}

// authenticateInstallation verifies a signed agent request: the timestamp within the skew, the
// installation known, and the Ed25519 signature over method, target, timestamp, installation
// and body digest valid under its registered public key.
func (s *Server) authenticateInstallation(ctx context.Context, r *http.Request, st *requestState, body []byte) (Actor, bool) {
	// One of each header: with two, which one a signature covers would be ambiguous.
	if !singleHeader(r, "Renga-Installation") || !singleHeader(r, "Renga-Timestamp") || !singleHeader(r, "Renga-Signature") {
		return Actor{}, false
	}
	id, ts, sig := r.Header.Get("Renga-Installation"), r.Header.Get("Renga-Timestamp"), r.Header.Get("Renga-Signature")
	if !installationIDPattern.MatchString(id) || len(ts) == 0 || len(ts) > 12 {
		return Actor{}, false
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || strconv.FormatInt(unix, 10) != ts {
		return Actor{}, false
	}
	if d := time.Since(time.Unix(unix, 0)); d > SignatureSkew || d < -SignatureSkew {
		return Actor{}, false
	}
	encoded, ok := strings.CutPrefix(sig, "ed25519=")
	if !ok {
		return Actor{}, false
	}
	signature, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil || len(signature) != ed25519.SignatureSize {
		return Actor{}, false
	}
	h, err := domain.InstallationForAuth(ctx, s.pool, id)
	if err != nil {
		if !errors.Is(err, db.ErrNotFound) {
			s.log.ErrorContext(ctx, "installation lookup failed", "error", err)
		}
		return Actor{}, false
	}
	target := r.RequestURI
	if target == "" {
		target = r.URL.RequestURI()
	}
	if !ed25519.Verify(ed25519.PublicKey(h.Installation.PublicKey), []byte(StringToSign(r.Method, target, ts, id, body)), signature) {
		return Actor{}, false
	}
	st.Installation = &h
	return Actor{Type: domain.ActorInstallation, ID: id, Name: h.Installation.Hostname, CredentialID: id,
		OrganizationID: h.Org.ID, OrganizationName: h.Org.Name, OrganizationState: h.Org.State}, true
}
