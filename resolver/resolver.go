// Package resolver is Renga's reference resolver (RFD 23, DESIGN §7.4): at a well-known address
// it answers an agent's home request from a static map of deployment identifiers to home URLs.
// It sees the identifier and the caller's address, nothing else: the request carries no
// credential, and nothing is logged but the identifier, the address and the answer.
package resolver

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/time/rate"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/problem"
)

// HomePath is the one path a resolver answers.
const HomePath = "/api/v1/agent/home"

var identifierPattern = regexp.MustCompile(`^[a-z0-9-]{1,16}$`)

// Map is the resolver's map: deployment identifier → home URL.
type Map map[string]string

// LoadMap reads and checks a map file: `deployments:` a mapping of identifiers (as
// RENGA_DEPLOYMENT_ID allows) to absolute http(s) URLs. Anything else in the file is refused.
func LoadMap(path string) (Map, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f struct {
		Deployments map[string]string `yaml:"deployments"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Deployments == nil {
		return nil, fmt.Errorf("%s: no deployments: mapping", path)
	}
	ids := make([]string, 0, len(f.Deployments))
	for id := range f.Deployments {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	m := Map{}
	for _, id := range ids {
		if !identifierPattern.MatchString(id) {
			return nil, fmt.Errorf("%s: deployments.%s: an identifier is 1 to 16 of a-z, 0-9 and -", path, id)
		}
		u, err := url.Parse(f.Deployments[id])
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			return nil, fmt.Errorf("%s: deployments.%s: %q is not an http(s) URL of a deployment", path, id, f.Deployments[id])
		}
		m[id] = strings.TrimRight(u.String(), "/")
	}
	return m, nil
}

// Resolver answers home requests from its current map.
type Resolver struct {
	m   atomic.Pointer[Map]
	log *slog.Logger

	rate  rate.Limit
	burst int
	mu    sync.Mutex
	seen  map[string]*visitor
	swept time.Time
}

type visitor struct {
	limiter *rate.Limiter
	last    time.Time
}

// New makes a resolver with a map and a per-address rate limit (requests per second, burst;
// a rate of 0 disables it).
func New(m Map, perSecond float64, burst int, log *slog.Logger) *Resolver {
	r := &Resolver{log: log, rate: rate.Limit(perSecond), burst: burst, seen: map[string]*visitor{}}
	r.m.Store(&m)
	return r
}

// Reload replaces the map with path's; on any error the old map stays and the error says why.
func (r *Resolver) Reload(path string) error {
	m, err := LoadMap(path)
	if err != nil {
		return err
	}
	r.m.Store(&m)
	return nil
}

// Map is the map in use.
func (r *Resolver) Map() Map { return *r.m.Load() }

// allow applies the per-address limit; idle addresses are forgotten after ten minutes.
func (r *Resolver) allow(addr string) bool {
	if r.rate <= 0 {
		return true
	}
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.swept) > time.Minute {
		for a, v := range r.seen {
			if now.Sub(v.last) > 10*time.Minute {
				delete(r.seen, a)
			}
		}
		r.swept = now
	}
	v, ok := r.seen[addr]
	if !ok {
		v = &visitor{limiter: rate.NewLimiter(r.rate, r.burst)}
		r.seen[addr] = v
	}
	v.last = now
	return v.limiter.AllowN(now, 1)
}

func requestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// ServeHTTP answers GET /api/v1/agent/home?deployment=ID with {"home": URL} for a known
// identifier and 404 for an unknown or empty one; everything else is a problem.
func (r *Resolver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	id := requestID()
	addr, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		addr = req.RemoteAddr
	}
	if !r.allow(addr) {
		p := problem.New(http.StatusTooManyRequests, api.ErrorCodeRateLimited, "Too many requests from this address; retry later.")
		p.RetryAfter = 1
		problem.Write(w, id, p)
		r.log.Info("home request", "request_id", id, "source", addr, "status", http.StatusTooManyRequests)
		return
	}
	if req.URL.Path != HomePath {
		problem.Write(w, id, problem.New(http.StatusNotFound, api.ErrorCodeNotFound, "A resolver answers only "+HomePath+"."))
		return
	}
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		problem.Write(w, id, problem.New(http.StatusMethodNotAllowed, api.ErrorCodeMethodNotAllowed, "Only GET."))
		return
	}
	ident := req.URL.Query().Get("deployment")
	home, ok := r.Map()[ident]
	if ident == "" || !ok {
		problem.Write(w, id, problem.New(http.StatusNotFound, api.ErrorCodeNotFound, "This resolver knows no home for that deployment identifier."))
		if len(ident) > 32 { // an identifier is at most 16 characters: keep the log small
			ident = ident[:32] + "..."
		}
		r.log.Info("home request", "request_id", id, "source", addr, "deployment", ident, "status", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(api.Home{Home: home})
	r.log.Info("home request", "request_id", id, "source", addr, "deployment", ident, "status", http.StatusOK, "home", home)
}
