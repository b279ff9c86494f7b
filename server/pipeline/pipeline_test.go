package pipeline

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestStaticRoutesAreTheMuxs holds the static routes (staticHandler) to the mux: every operation
// whose path has no parameter is found by its method and path, each is the pattern the mux routes
// that request to, and a request the lookup leaves (another method, a path sent with escapes, a
// path with parameters) goes to the mux.
func TestStaticRoutesAreTheMuxs(t *testing.T) {
	p, err := New(Options{Development: true}, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for pattern := range p.ops {
		p.HandleFunc(pattern, func(http.ResponseWriter, *http.Request) {})
	}
	if err := p.Err(); err != nil {
		t.Fatal(err)
	}
	static := 0
	for pattern := range p.ops {
		method, path, _ := strings.Cut(pattern, " ")
		r := probe(pattern)
		if strings.Contains(path, "{") {
			if p.staticHandler(r) != nil {
				t.Errorf("%s: a path with parameters was routed as static", pattern)
			}
			continue
		}
		static++
		if p.staticHandler(r) == nil {
			t.Errorf("%s: not found as a static route", pattern)
		}
		if _, got := p.mux.Handler(r); got != pattern {
			t.Errorf("%s: the mux routes it to %q", pattern, got)
		}
		head := httptest.NewRequest(http.MethodHead, path, nil)
		if method == http.MethodGet && p.staticHandler(head) != nil {
			t.Errorf("%s: HEAD routed as static (the mux routes HEAD to the GET pattern, which refuses it)", pattern)
		}
		// The same path with one letter escaped: the mux decides, as it matches what was sent.
		i := strings.LastIndexByte(path, '/') + 1
		escaped := httptest.NewRequest(method, path[:i]+"%"+strings.ToUpper(hex2(path[i]))+path[i+1:], nil)
		if escaped.URL.Path != path || escaped.URL.RawPath == "" {
			escaped.URL.RawPath = path[:i] + "%" + strings.ToUpper(hex2(path[i])) + path[i+1:]
		}
		if p.staticHandler(escaped) != nil {
			t.Errorf("%s: a path sent with escapes was routed as static", pattern)
		}
	}
	if static < 10 || len(p.static) != static {
		t.Errorf("%d static routes for %d operations without path parameters", len(p.static), static)
	}
}

func hex2(b byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&15]})
}

// TestDirectAnswersHaveNoDeadline: a direct answer (Options.Direct) runs no statement and gets
// no request deadline; the same operation through its mounted handler gets RequestTimeout's.
func TestDirectAnswersHaveNoDeadline(t *testing.T) {
	for _, direct := range []bool{true, false} {
		ran, deadline := false, false
		record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran = true
			_, deadline = r.Context().Deadline()
			w.WriteHeader(http.StatusOK)
		})
		opts := Options{Development: true, RequestTimeout: time.Minute}
		if direct {
			opts.Direct = map[string]http.Handler{"getHome": record}
		}
		p, err := New(opts, nil, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		for pattern := range p.ops {
			p.HandleFunc(pattern, record)
		}
		if err := p.Err(); err != nil {
			t.Fatal(err)
		}
		w := httptest.NewRecorder()
		p.AccessLog(p).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v1/agent/home?deployment=eu1", nil))
		if w.Code != http.StatusOK || !ran || deadline == direct {
			t.Errorf("direct %v: %d, ran %v, with a deadline %v", direct, w.Code, ran, deadline)
		}
	}
}
