package apitest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/secretbox"
	"renga.dev/renga/server/servertest"
)

// The test client always connects from 127.0.0.1.

func trustProxies(prefixes ...string) servertest.Option {
	return func(c *server.Config) {
		for _, p := range prefixes {
			c.TrustedProxies = append(c.TrustedProxies, netip.MustParsePrefix(p))
		}
	}
}

// selfWithXFF calls GET /tokens/self with X-Forwarded-For values.
func selfWithXFF(t testing.TB, env *servertest.Env, token string, xff ...string) reply {
	t.Helper()
	h := http.Header{}
	for _, v := range xff {
		h.Add("X-Forwarded-For", v)
	}
	return send(t, env, req{Method: http.MethodGet, Path: selfPath, Token: token, Header: h})
}

func TestSourceAddressUntrustedPeer(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t) // no trusted proxies
	_, token := mintToken(t, env, domain.NewToken{Scopes: []string{"audit:read"},
		AllowedSources: []netip.Prefix{mustPrefix("203.0.113.7/32")}})
	// An untrusted peer's forwarding header is ignored: the source is 127.0.0.1.
	selfWithXFF(t, env, token, "203.0.113.7").expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	selfWithXFF(t, env, token).expectProblem(t, http.StatusUnauthorized, "unauthenticated")

	// Control: a token allowing the real peer works with the same header.
	_, local := mintToken(t, env, domain.NewToken{Scopes: []string{"audit:read"},
		AllowedSources: []netip.Prefix{mustPrefix("127.0.0.0/8")}})
	if r := selfWithXFF(t, env, local, "203.0.113.7"); r.Status != http.StatusOK {
		t.Errorf("token allowing 127.0.0.0/8: %d %s", r.Status, r.Body)
	}
}

func TestSourceAddressTrustedProxy(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, trustProxies("127.0.0.1/32"))
	_, token := mintToken(t, env, domain.NewToken{Scopes: []string{"organizations:write", "audit:read"},
		AllowedSources: []netip.Prefix{mustPrefix("203.0.113.7/32")}})

	cases := []struct {
		name string
		xff  []string
		want int
	}{
		{"client behind the proxy", []string{"203.0.113.7"}, http.StatusOK},
		{"trusted hops are skipped from the right", []string{"203.0.113.7, 127.0.0.1"}, http.StatusOK},
		{"hops over several headers", []string{"203.0.113.7", "127.0.0.1"}, http.StatusOK},
		{"a spoofed left-most hop does not count", []string{"198.51.100.1, 203.0.113.7"}, http.StatusOK},
		{"first untrusted hop from the right decides", []string{"203.0.113.7, 198.51.100.1"}, http.StatusUnauthorized},
		{"no header: the proxy itself is the source", nil, http.StatusUnauthorized},
		{"garbled hop", []string{"203.0.113.7, not-an-address"}, http.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := selfWithXFF(t, env, token, tc.xff...)
			if tc.want == http.StatusUnauthorized {
				r.expectProblem(t, http.StatusUnauthorized, "unauthenticated")
			} else if r.Status != tc.want {
				t.Errorf("X-Forwarded-For %q: %d %s, want %d", tc.xff, r.Status, r.Body, tc.want)
			}
		})
	}

	t.Run("audit records the resolved address", func(t *testing.T) {
		r := send(t, env, req{Method: http.MethodPost, Path: orgsPath, Token: token,
			Body:   jsonBody(map[string]string{"slug": "proxied", "display_name": "Proxied"}),
			Header: headers("Idempotency-Key", newKey(), "X-Forwarded-For", "203.0.113.7, 127.0.0.1")})
		if r.Status != http.StatusCreated {
			t.Fatalf("create through the proxy: %d %s", r.Status, r.Body)
		}
		events := auditByRequest(t, env, r.Header.Get("X-Request-Id"))
		if len(events) != 1 || events[0].SourceAddress != "203.0.113.7" {
			t.Errorf("audit events %+v, want one with source_address 203.0.113.7", events)
		}
	})
}

func TestHTTPSRequiredInProduction(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Environment = server.EnvProduction
		c.TrustedProxies = []netip.Prefix{mustPrefix("10.0.0.0/8")} // 127.0.0.1 is not trusted
	})
	_, token := scopedToken(t, env, servertest.AllScopes()...)
	send(t, env, req{Method: http.MethodGet, Path: selfPath, Token: token}).expectProblem(t, http.StatusForbidden, "https_required")
	// An untrusted peer cannot claim HTTPS.
	send(t, env, req{Method: http.MethodGet, Path: selfPath, Token: token, Header: headers("X-Forwarded-Proto", "https")}).
		expectProblem(t, http.StatusForbidden, "https_required")
	// Writes are refused too, and change nothing.
	send(t, env, createReq(token, newKey(), jsonBody(map[string]string{"slug": "plain", "display_name": "Plain"}))).
		expectProblem(t, http.StatusForbidden, "https_required")
	if n := countRows(t, env, `SELECT count(*) FROM organizations`); n != 0 {
		t.Errorf("a plain-HTTP write created %d organizations", n)
	}
}

func TestHTTPSFromTrustedProxyInProduction(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) {
		c.Environment = server.EnvProduction
		c.TrustedProxies = []netip.Prefix{mustPrefix("127.0.0.1/32")}
	})
	_, token := scopedToken(t, env, "audit:read")
	if r := send(t, env, req{Method: http.MethodGet, Path: selfPath, Token: token, Header: headers("X-Forwarded-Proto", "https")}); r.Status != http.StatusOK {
		t.Errorf("X-Forwarded-Proto https from a trusted proxy: %d %s", r.Status, r.Body)
	}
	send(t, env, req{Method: http.MethodGet, Path: selfPath, Token: token, Header: headers("X-Forwarded-Proto", "http")}).
		expectProblem(t, http.StatusForbidden, "https_required")
	send(t, env, req{Method: http.MethodGet, Path: selfPath, Token: token}).
		expectProblem(t, http.StatusForbidden, "https_required")
}

// configVariables lists the variables a LoadConfig error names.
func configVariables(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if ce, ok := err.(*server.ConfigError); ok { //nolint:errorlint // the walk visits each error of the join
			out = append(out, ce.Variable)
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		} else if u := errors.Unwrap(err); u != nil {
			walk(u)
		}
	}
	walk(err)
	return out
}

func TestLoadConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := writeSelfSignedCert(t, dir)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{
		"RENGA_DATABASE_URL": "postgres://renga@db.example/renga",
		"RENGA_PUBLIC_URL":   "https://renga.example.com",
		"RENGA_SMTP_URL":     "smtp://mail.example:25",
		"RENGA_SECRET_KEY":   secretbox.NewKey(),
	}
	env := func(overrides ...string) func(string) string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(overrides); i += 2 {
			if overrides[i+1] == "" {
				delete(m, overrides[i])
			} else {
				m[overrides[i]] = overrides[i+1]
			}
		}
		return func(k string) string { return m[k] }
	}

	refused := []struct {
		name     string
		getenv   func(string) string
		mode     server.Mode
		variable string
	}{
		{"production without TLS or trusted proxies", env(), server.ModeServe, "RENGA_TLS_CERT_FILE"},
		{"bad RENGA_DEPLOYMENT_ID", env("RENGA_TRUSTED_PROXIES", "10.0.0.0/8", "RENGA_DEPLOYMENT_ID", "EU_1"), server.ModeServe, "RENGA_DEPLOYMENT_ID"},
		{"RENGA_DEPLOYMENT_ID too long", env("RENGA_TRUSTED_PROXIES", "10.0.0.0/8", "RENGA_DEPLOYMENT_ID", strings.Repeat("a", 17)), server.ModeServe, "RENGA_DEPLOYMENT_ID"},
		{"missing RENGA_DATABASE_URL", env("RENGA_TRUSTED_PROXIES", "10.0.0.0/8", "RENGA_DATABASE_URL", ""), server.ModeServe, "RENGA_DATABASE_URL"},
		{"bad RENGA_TRUSTED_PROXIES", env("RENGA_TRUSTED_PROXIES", "10.0.0.0/8, proxy.example"), server.ModeServe, "RENGA_TRUSTED_PROXIES"},
		{"TLS certificate without key", env("RENGA_TLS_CERT_FILE", cert), server.ModeServe, "RENGA_TLS_CERT_FILE"},
		{"TLS files that are not PEM", env("RENGA_TLS_CERT_FILE", garbage, "RENGA_TLS_KEY_FILE", garbage), server.ModeServe, "RENGA_TLS_CERT_FILE"},
		{"missing RENGA_SECRET_KEY", env("RENGA_TRUSTED_PROXIES", "10.0.0.0/8", "RENGA_SECRET_KEY", ""), server.ModeServe, "RENGA_SECRET_KEY"},
		{"RENGA_SECRET_KEY not base64", env("RENGA_TRUSTED_PROXIES", "10.0.0.0/8", "RENGA_SECRET_KEY", "not base64!"), server.ModeServe, "RENGA_SECRET_KEY"},
		{"RENGA_SECRET_KEY too short", env("RENGA_TRUSTED_PROXIES", "10.0.0.0/8", "RENGA_SECRET_KEY", "c2hvcnQ="), server.ModeServe, "RENGA_SECRET_KEY"},
		{"bad RENGA_SECRET_KEY_PREVIOUS", env("RENGA_TRUSTED_PROXIES", "10.0.0.0/8", "RENGA_SECRET_KEY_PREVIOUS", secretbox.NewKey()+",c2hvcnQ="), server.ModeServe, "RENGA_SECRET_KEY_PREVIOUS"},
		{"RENGA_SECRET_KEY bad in a release command too", env("RENGA_SECRET_KEY", "c2hvcnQ="), server.ModeRelease, "RENGA_SECRET_KEY"},
		{"RENGA_IDENTITY_PROVIDERS not JSON", env("RENGA_TRUSTED_PROXIES", "10.0.0.0/8", "RENGA_IDENTITY_PROVIDERS", "[{"), server.ModeServe, "RENGA_IDENTITY_PROVIDERS"},
		{"RENGA_IDENTITY_PROVIDERS unknown member", env("RENGA_TRUSTED_PROXIES", "10.0.0.0/8", "RENGA_IDENTITY_PROVIDERS",
			`[{"slug":"corp","protocol":"oidc","issuer":"https://id.example","display_name":"Corp","client_id":"c","secret":"x"}]`), server.ModeServe, "RENGA_IDENTITY_PROVIDERS"},
		{"RENGA_IDENTITY_PROVIDERS plain http issuer", env("RENGA_TRUSTED_PROXIES", "10.0.0.0/8", "RENGA_IDENTITY_PROVIDERS",
			`[{"slug":"corp","protocol":"oidc","issuer":"http://id.example","display_name":"Corp","client_id":"c"}]`), server.ModeServe, "RENGA_IDENTITY_PROVIDERS"},
		{"RENGA_IDENTITY_PROVIDERS slug twice", env("RENGA_TRUSTED_PROXIES", "10.0.0.0/8", "RENGA_IDENTITY_PROVIDERS",
			`[{"slug":"corp","protocol":"oidc","issuer":"https://id.example","display_name":"Corp","client_id":"c"},`+
				`{"slug":"corp","protocol":"oidc","issuer":"https://id2.example","display_name":"Corp","client_id":"c"}]`), server.ModeServe, "RENGA_IDENTITY_PROVIDERS"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			_, err := server.LoadConfig(tc.getenv, tc.mode)
			if err == nil {
				t.Fatal("LoadConfig accepted the configuration")
			}
			if !strings.Contains(err.Error(), tc.variable) {
				t.Errorf("error %q does not name %s", err, tc.variable)
			}
			if vars := configVariables(err); !contains(vars, tc.variable) {
				t.Errorf("ConfigError variables %v do not include %s", vars, tc.variable)
			}
		})
	}

	accepted := []struct {
		name   string
		getenv func(string) string
		mode   server.Mode
		check  func(t *testing.T, c server.Config)
	}{
		{"production behind trusted proxies", env("RENGA_TRUSTED_PROXIES", "10.0.0.0/8, 192.0.2.1", "RENGA_DEPLOYMENT_ID", "eu-1"), server.ModeServe,
			func(t *testing.T, c server.Config) {
				if c.Environment != server.EnvProduction || c.DeploymentID != "eu-1" || len(c.TrustedProxies) != 2 ||
					c.TrustedProxies[1] != netip.MustParsePrefix("192.0.2.1/32") {
					t.Errorf("config = %+v", c)
				}
			}},
		{"production with TLS files", env("RENGA_TLS_CERT_FILE", cert, "RENGA_TLS_KEY_FILE", key), server.ModeServe,
			func(t *testing.T, c server.Config) {
				if c.TLSCertFile != cert || c.TLSKeyFile != key {
					t.Errorf("config = %+v", c)
				}
			}},
		{"development needs neither TLS, a database URL nor a secret key", env("RENGA_DATABASE_URL", "", "RENGA_PUBLIC_URL", "",
			"RENGA_SECRET_KEY", "", "RENGA_DATA_DIR", filepath.Join(dir, "dev")), server.ModeDev,
			func(t *testing.T, c server.Config) {
				if !c.Development() || c.Secrets == nil {
					t.Errorf("config = %+v", c)
				}
				// The development key is kept, private, and the same at the next start.
				fi, err := os.Stat(filepath.Join(dir, "dev", "secret_key"))
				if err != nil || fi.Mode().Perm() != 0o600 {
					t.Fatalf("development key file: %v, %v", fi, err)
				}
				again, err := server.LoadConfig(env("RENGA_DATABASE_URL", "", "RENGA_PUBLIC_URL", "", "RENGA_SECRET_KEY", "",
					"RENGA_DATA_DIR", filepath.Join(dir, "dev")), server.ModeDev)
				if err != nil {
					t.Fatal(err)
				}
				sealed := c.Secrets.Seal([]byte("s"), "a")
				if got, err := again.Secrets.Open(sealed, "a"); err != nil || string(got) != "s" {
					t.Errorf("the second start has another key: %q, %v", got, err)
				}
			}},
		{"a release command needs no secret key", env("RENGA_SECRET_KEY", ""), server.ModeRelease,
			func(t *testing.T, c server.Config) {
				if c.Secrets != nil {
					t.Errorf("secrets = %v", c.Secrets)
				}
			}},
		{"environment providers, with default scopes", env("RENGA_TRUSTED_PROXIES", "10.0.0.0/8", "RENGA_IDENTITY_PROVIDERS",
			`[{"slug":"corp","protocol":"oidc","issuer":"https://id.example","display_name":"Corp","client_id":"c","client_secret":"s"}]`), server.ModeServe,
			func(t *testing.T, c server.Config) {
				if len(c.IdentityProviders) != 1 || c.IdentityProviders[0].Slug != "corp" ||
					!slices.Equal(c.IdentityProviders[0].Scopes, []string{"openid", "email", "profile"}) {
					t.Errorf("providers = %+v", c.IdentityProviders)
				}
			}},
	}
	for _, tc := range accepted {
		t.Run(tc.name, func(t *testing.T) {
			c, err := server.LoadConfig(tc.getenv, tc.mode)
			if err != nil {
				t.Fatalf("LoadConfig refused: %v", err)
			}
			tc.check(t, c)
		})
	}
}

// writeSelfSignedCert writes a PEM certificate and key for localhost into dir.
func writeSelfSignedCert(t testing.TB, dir string) (string, string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}
