package apitest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server"
	"renga.dev/renga/server/servertest"
)

// Agent acceptance (issue 5, RFD 23): the home request.

// homeGet sends GET /api/v1/agent/home with a raw query (nil: no query at all), an optional
// Host header and other headers.
func homeGet(t testing.TB, env *servertest.Env, rawQuery *string, host string, h http.Header) reply {
	t.Helper()
	u := env.URL + homePath
	if rawQuery != nil {
		u += "?" + *rawQuery
	}
	hr, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		hr.Host = host
	}
	for k, vs := range h {
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	resp, err := httpClient.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// expectHome asserts a 200 whose body is exactly {"home": want} and nothing else.
func expectHome(t testing.TB, what string, r reply, want string) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Errorf("%s: %d %s, want 200", what, r.Status, r.Body)
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
	var body map[string]any
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Errorf("%s: body not JSON: %s", what, r.Body)
		return
	}
	if len(body) != 1 || body["home"] != want {
		t.Errorf("%s: body %s, want exactly {\"home\": %q}", what, r.Body, want)
	}
	for _, h := range []string{"Set-Cookie", "Location"} {
		if r.Header.Get(h) != "" {
			t.Errorf("%s: the home answer carries %s: %q", what, h, r.Header.Get(h))
		}
	}
}

func q(s string) *string { return &s }

// TestHomeAnswersThePublicURL: whatever the identifier asked for, a deployment answers its own
// configured public URL, and nothing of the request (Host, forwarding headers) changes it — even
// behind a trusted proxy.
func TestHomeAnswersThePublicURL(t *testing.T) {
	t.Parallel()
	const public = "https://eu1.renga.example.com"
	direct := servertest.Start(t, withDeploymentID("eu1"), func(c *server.Config) { c.PublicURL = public })
	proxied := sibling(t, direct, trustProxies("127.0.0.0/8"))
	if direct.Config.PublicURL != public {
		t.Fatalf("PublicURL = %q", direct.Config.PublicURL)
	}
	queries := map[string]*string{
		"no parameter":          nil,
		"empty":                 q("deployment="),
		"unknown":               q("deployment=zz9"),
		"its own identifier":    q("deployment=eu1"),
		"another deployment's":  q("deployment=us2"),
		"256 characters":        q("deployment=" + strings.Repeat("a", 256)),
		"a URL":                 q("deployment=" + url.QueryEscape("https://evil.example/x")),
		"with an unknown param": q("deployment=eu1&home=https://evil.example"),
	}
	hostile := []struct {
		name   string
		host   string
		header http.Header
	}{
		{"plain", "", nil},
		{"hostile Host", "evil.example", nil},
		{"X-Forwarded-Host", "", headers("X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "http")},
		{"Host and forwarding headers", "evil.example:8443", headers("X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "https",
			"X-Forwarded-For", "203.0.113.9", "Forwarded", `for=203.0.113.9;host=evil.example;proto=https`, "X-Original-URL", "https://evil.example/")},
	}
	for _, srv := range []*servertest.Env{direct, proxied} {
		for qname, query := range queries {
			for _, h := range hostile {
				what := qname + ", " + h.name
				if srv == proxied {
					what += " (behind a trusted proxy)"
				}
				expectHome(t, what, homeGet(t, srv, query, h.host, h.header), public)
			}
		}
	}
	// Requests outside the parameter's description (over its 256 characters, or repeated) are
	// refused as 400 invalid_request, never answered with another home.
	for name, query := range map[string]string{
		"257 characters": "deployment=" + strings.Repeat("a", 257),
		"repeated":       "deployment=eu1&deployment=" + url.QueryEscape("https://evil.example"),
	} {
		for _, h := range hostile {
			if p := homeGet(t, direct, &query, h.host, h.header).expectProblem(t, http.StatusBadRequest, "invalid_request"); len(p.Errors) != 1 || p.Errors[0].Field != "deployment" {
				t.Errorf("%s, %s: errors %+v, want one naming deployment", name, h.name, p.Errors)
			}
		}
	}
	// Credentials change nothing either, and are not needed.
	expectHome(t, "with a bogus bearer token", homeGet(t, direct, q("deployment=eu1"), "",
		headers("Authorization", "Bearer renga_intake_eu1_"+strings.Repeat("a", 52))), public)
}

// TestHomeIsRateLimited: the home request is limited per source address (429 rate_limited with
// Retry-After); an untrusted peer's X-Forwarded-For does not buy a fresh bucket, a trusted
// proxy's forwarded client gets its own.
func TestHomeIsRateLimited(t *testing.T) {
	t.Parallel()
	limited := func(c *server.Config) { c.RateLimitAnonymous, c.RateLimitAnonymousBurst = 0.001, 3 }
	env := servertest.Start(t, limited)
	for i := 0; i < 3; i++ {
		expectHome(t, "within the burst", homeGet(t, env, q("deployment=eu1"), "", nil), env.Config.PublicURL)
	}
	for _, h := range []http.Header{nil, headers("X-Forwarded-For", "203.0.113.50")} {
		r := homeGet(t, env, q("deployment=eu1"), "", h)
		r.expectProblem(t, http.StatusTooManyRequests, "rate_limited")
		if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
			t.Errorf("429 Retry-After = %q", r.Header.Get("Retry-After"))
		}
	}

	proxied := servertest.Start(t, limited, trustProxies("127.0.0.0/8"))
	client := func(ip string) http.Header { return headers("X-Forwarded-For", ip) }
	for i := 0; i < 3; i++ {
		expectHome(t, "client A within the burst", homeGet(t, proxied, q(""), "", client("203.0.113.1")), proxied.Config.PublicURL)
	}
	homeGet(t, proxied, q(""), "", client("203.0.113.1")).expectProblem(t, http.StatusTooManyRequests, "rate_limited")
	expectHome(t, "client B behind the same proxy", homeGet(t, proxied, q(""), "", client("203.0.113.2")), proxied.Config.PublicURL)
}

// FuzzHomeDirectAnswerIsTheGenerated holds the server's home answer (pipeline.Options.Direct:
// the pipeline's stages, then the answer encoded once, without the generated handler's binding
// of the query) to the generated handler's: every query the server answers 200, the generated
// handler binds and answers with the same status, Content-Type and body, so that leaving its
// binding out lets nothing through that it would refuse.
func FuzzHomeDirectAnswerIsTheGenerated(f *testing.F) {
	env := servertest.Start(f, func(c *server.Config) { c.RateLimitAnonymous = 0 })
	generated := api.Handler(api.NewStrictHandler(env.Server, nil))
	for _, s := range []string{
		"", "deployment=eu1", "deployment=", "deployment", "deployment=a&deployment=b", "deployment=a&Deployment=b",
		"deployment=%zz", "deployment=%00", "deployment=%ff", "deployment=a;b", "deployment=a+b", "deployment=%2B",
		"deployment[]=a", "deployment=eu1&home=x", "&&", "=", "deployment=" + strings.Repeat("a", 300), "%64eployment=x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, query string) {
		serve := func(h http.Handler) *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodGet, homePath, nil)
			r.URL.RawQuery = query
			r.RequestURI = homePath + "?" + query
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		got := serve(env.Server.Handler())
		if got.Code != http.StatusOK {
			if got.Code != http.StatusBadRequest {
				t.Fatalf("?%s: %d %s", query, got.Code, got.Body)
			}
			return
		}
		want := serve(generated)
		if want.Code != got.Code || want.Body.String() != got.Body.String() || want.Header().Get("Content-Type") != got.Header().Get("Content-Type") {
			t.Fatalf("?%s: the server answers %d %q %q, the generated handler %d %q %q", query,
				got.Code, got.Header().Get("Content-Type"), got.Body, want.Code, want.Header().Get("Content-Type"), want.Body)
		}
	})
}
