package apitest

// A minimal agent client written from openapi.yaml alone: the description of the
// installationSignature security scheme. It deliberately imports nothing of the server's code
// (no domain.StringToSign): if the server and the spec disagree, these tests say so.

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/servertest"
)

// specAgent is one installation's identity as an agent holds it: its ID and Ed25519 key pair.
type specAgent struct {
	ID   string
	Pub  ed25519.PublicKey
	Priv ed25519.PrivateKey
	env  *servertest.Env
}

// newSpecAgent makes a fresh identity: "ins_" and 26 random characters of 0-9a-z (the spec's
// InstallationId), and a new Ed25519 key pair.
func newSpecAgent(env *servertest.Env) *specAgent {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return &specAgent{ID: newInstallationID(), Pub: pub, Priv: priv, env: env}
}

func newInstallationID() string {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
	b := make([]byte, 26)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "ins_" + string(b)
}

// publicKeyB64 is the public key as registration sends it: 32 bytes in standard base64.
func (a *specAgent) publicKeyB64() string { return base64.StdEncoding.EncodeToString(a.Pub) }

// specStringToSign is the spec's string to sign: six lines joined by a single "\n", no trailing
// newline — "renga-request-v1", the upper-case method, the request target exactly as sent (path
// and, if any, "?" and the query), the Renga-Timestamp value, the Renga-Installation value, and
// the lowercase hex SHA-256 of the body as sent (of the empty string when there is none).
func specStringToSign(method, target, timestamp, installationID string, body []byte) string {
	digest := sha256.Sum256(body)
	return "renga-request-v1\n" + strings.ToUpper(method) + "\n" + target + "\n" + timestamp + "\n" +
		installationID + "\n" + hex.EncodeToString(digest[:])
}

// signAs returns the three headers of a request signed with priv, claiming installation id, at
// ts: Renga-Signature is "ed25519=" and the padded standard base64 of the 64-byte signature.
// The signature is tracked as a secret that must never be logged or stored.
func signAs(env *servertest.Env, priv ed25519.PrivateKey, id, method, target string, body []byte, ts time.Time) http.Header {
	stamp := strconv.FormatInt(ts.Unix(), 10)
	sig := base64.StdEncoding.EncodeToString(ed25519.Sign(priv, []byte(specStringToSign(method, target, stamp, id, body))))
	agentTrack(env, "ed25519="+sig, sig)
	return headers("Renga-Installation", id, "Renga-Timestamp", stamp, "Renga-Signature", "ed25519="+sig)
}

// sign is signAs with the agent's own key and ID.
func (a *specAgent) sign(method, target string, body []byte, ts time.Time) http.Header {
	return signAs(a.env, a.Priv, a.ID, method, target, body, ts)
}

// do sends a request signed now.
func (a *specAgent) do(t testing.TB, method, target string, body []byte) reply {
	t.Helper()
	return send(t, a.env, req{Method: method, Path: target, Body: body, Header: a.sign(method, target, body, time.Now())})
}

// doE is do for goroutines.
func (a *specAgent) doE(method, target string, body []byte) (reply, error) {
	return sendE(a.env, req{Method: method, Path: target, Body: body, Header: a.sign(method, target, body, time.Now())})
}

// TestSpecDescribesTheSigningThisClientImplements pins the sentences of openapi.yaml this client
// was written from, so that the spec cannot change under it unnoticed.
func TestSpecDescribesTheSigningThisClientImplements(t *testing.T) {
	t.Parallel()
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	scheme := spec.Components.SecuritySchemes["installationSignature"]
	if scheme == nil || scheme.Value == nil {
		t.Fatal("openapi.yaml has no installationSignature security scheme")
	}
	d := strings.Join(strings.Fields(scheme.Value.Description), " ")
	for _, want := range []string{
		"Ed25519", "RFC 8032",
		"`Renga-Installation`: the installation ID",
		"`Renga-Timestamp`: when the request was signed, in decimal Unix seconds",
		"`ed25519=` followed by the standard base64 encoding (with padding) of the 64-byte signature",
		"six lines joined by a single `\\n` (no trailing newline)",
		"`renga-request-v1`",
		"the HTTP method, upper case",
		"the request target exactly as sent in the request line: path and, if any, `?` and the query",
		"the `Renga-Timestamp` value",
		"the `Renga-Installation` value",
		"the lowercase hex SHA-256 of the request body as sent (of the empty string when there is no body)",
		"within 300 seconds",
		"`401 unauthenticated`",
	} {
		if !strings.Contains(d, want) {
			t.Errorf("the installationSignature description no longer says %q; update the spec-only client", want)
		}
	}
	// Every operation after registration is signed.
	for path, item := range spec.Paths.Map() {
		if !strings.HasPrefix(path, "/api/v1/agent/") {
			continue
		}
		for method, op := range item.Operations() {
			var names []string
			if op.Security != nil {
				for _, req := range *op.Security {
					for name := range req {
						names = append(names, name)
					}
				}
			}
			want := map[string]string{"/api/v1/agent/home": "", "/api/v1/agent/installations": "intakeKey"}[path]
			if _, special := map[string]bool{"/api/v1/agent/home": true, "/api/v1/agent/installations": true}[path]; !special {
				want = "installationId,installationSignature,installationTimestamp"
			}
			slices.Sort(names)
			if got := strings.Join(names, ","); got != want {
				t.Errorf("%s %s: security %q, want %q", method, path, got, want)
			}
		}
	}
}
