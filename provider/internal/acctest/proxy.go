package acctest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// Proxy stands between the provider and the server. For the requests Drop selects it forwards
// the request, lets the server answer (so whatever the request did is committed), then closes
// the client's connection without a byte of the response: a response lost on the way back.
type Proxy struct {
	URL string

	mu        sync.Mutex
	drop      func(*http.Request) bool
	seen      map[string]int // "METHOD path" → requests that reached the proxy
	Committed []Exchange     // responses the client never got
}

// Exchange is one request the proxy let through and the response it dropped.
type Exchange struct {
	Method, Path string
	Status       int
	Body         []byte
}

// NewProxy starts a proxy in front of target that drops nothing until told to.
func NewProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{seen: map[string]int{}}
	forward := httputil.NewSingleHostReverseProxy(u)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen[r.Method+" "+r.URL.Path]++
		drop := p.drop != nil && p.drop(r)
		p.mu.Unlock()
		if !drop {
			forward.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		forward.ServeHTTP(rec, r)
		p.mu.Lock()
		p.Committed = append(p.Committed, Exchange{Method: r.Method, Path: r.URL.Path, Status: rec.Code, Body: bytes.Clone(rec.Body.Bytes())})
		p.mu.Unlock()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("proxy: hijack: %v", err)
			return
		}
		_ = conn.Close()
	}))
	t.Cleanup(ts.Close)
	p.URL = ts.URL
	return p
}

// Drop selects the requests whose responses are dropped from now on (nil: none).
func (p *Proxy) Drop(f func(*http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop = f
}

// DropFirst drops the response of the first n requests with method and path.
func (p *Proxy) DropFirst(n int, method, path string) {
	var dropped int
	p.Drop(func(r *http.Request) bool {
		if r.Method != method || r.URL.Path != path || dropped >= n {
			return false
		}
		dropped++
		return true
	})
}

// Seen counts the requests with method and path that reached the proxy.
func (p *Proxy) Seen(method, path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[method+" "+path]
}

// Dropped returns the exchanges whose responses were dropped.
func (p *Proxy) Dropped() []Exchange {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Exchange(nil), p.Committed...)
}
