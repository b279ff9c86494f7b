package pipeline

import (
	"context"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/problem"
)

// accessLog is the first stage: it makes the request's state (ID, source address), and when the
// request is done writes one log line (never headers, bodies or credentials) and its metrics.
func (p *Pipeline) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		// The request's state, its status writer and the context carrying the state, in one
		// allocation. Only the in-process transport (LocalTransport) makes a state before this
		// stage.
		rq := &requestParts{sw: statusWriter{ResponseWriter: w}}
		st, ok := r.Context().Value(stateKey{}).(*State)
		if !ok {
			st = &rq.st
			rq.ctx = stateContext{Context: r.Context(), st: st}
			r = r.WithContext(&rq.ctx)
		}
		sw := &rq.sw
		st.ID = db.NewRequestID(start)
		st.Source, st.sourceText = resolveSource(r, p.opts.TrustedProxies)
		rq.id[0] = st.ID
		w.Header()["X-Request-Id"] = rq.id[:] // the canonical key: Set would canonicalize it again
		// Every API answer is for its caller alone and is never to be sniffed as another type
		// (openapi.yaml declares both on every response).
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		if clean(r.URL.Path) {
			next.ServeHTTP(sw, r)
		} else {
			p.uncleanPath(sw, r)
		}
		opID, route := "", ""
		if st.Op != nil {
			opID, route = st.Op.ID, st.Op.Route
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		end := time.Now()
		p.metrics.observe(opID, status, end.Sub(start))
		// The line goes to the handler directly: Logger.LogAttrs would record the caller's
		// program counter (a stack walk per request) that no line shows.
		if h := p.log.Handler(); h.Enabled(r.Context(), slog.LevelInfo) {
			line := slog.NewRecord(end, slog.LevelInfo, "request", 0)
			line.AddAttrs(slog.String("request_id", st.ID),
				slog.String("method", r.Method), slog.String("route", route), slog.String("operation", opID),
				slog.Int("status", status), slog.Duration("duration", end.Sub(start)),
				slog.String("actor", st.Actor.ID), slog.String("source", sourceString(st)))
			_ = h.Handle(r.Context(), line) // an error writing the log is not the request's
		}
	})
}

// clean reports whether a path is one the router takes as it is: no empty segment, no "." or
// ".." segment. (Go's ServeMux would answer any other with a redirect in text/html.)
func clean(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	// With no "//" and no "/.", no segment is empty (but a last one, after a trailing slash) or
	// a dot segment: nothing for Clean to change (FuzzCleanIsPathClean).
	if !strings.Contains(p, "//") && !strings.Contains(p, "/.") {
		return true
	}
	c := path.Clean(p)
	return c == p || (c != "/" && c+"/" == p) // a trailing slash is the router's own business
}

// uncleanPath answers a path the router would redirect: under the API as a path no operation
// has (after authentication where the API demands it first), elsewhere 404; problem+json
// either way.
func (p *Pipeline) uncleanPath(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/api/") && !p.admitUnrouted(w, r) {
		return
	}
	Fail(w, r, problem.Newf(http.StatusNotFound, api.ErrorCodeNotFound, "No operation at %s (a path has no empty, \".\" or \"..\" segment).", r.URL.Path))
}

// requestParts is what the access stage makes for each request, allocated together.
type requestParts struct {
	st  State
	sw  statusWriter
	ctx stateContext
	id  [1]string // the X-Request-Id header's value
}

// stateContext is the request's context with its state: context.WithValue's, without an
// allocation of its own.
type stateContext struct {
	context.Context
	st *State
}

func (c *stateContext) Value(key any) any {
	if key == (stateKey{}) {
		return c.st
	}
	return c.Context.Value(key)
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer (a streamed operation
// lifts its deadlines through it).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// byOperation holds each operation's series once looked up (operation ID → *opMetrics):
	// the vectors' WithLabelValues hashes and checks the label values on every call.
	byOperation sync.Map
}

// opMetrics are one operation's series: its latency, and its count by status (int → counter).
type opMetrics struct {
	duration prometheus.Observer
	requests sync.Map
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "renga_http_requests_total", Help: "HTTP requests by operation and status.",
		}, []string{"operation", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "renga_http_request_duration_seconds", Help: "HTTP request latency by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"operation"}),
	}
	m.reg.MustRegister(m.requests, m.duration, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(operation string, status int, d time.Duration) {
	if operation == "" {
		operation = "none"
	}
	om, ok := m.byOperation.Load(operation)
	if !ok {
		om, _ = m.byOperation.LoadOrStore(operation, &opMetrics{duration: m.duration.WithLabelValues(operation)})
	}
	o := om.(*opMetrics) //nolint:forcetypeassert // byOperation holds nothing else
	c, ok := o.requests.Load(status)
	if !ok {
		c, _ = o.requests.LoadOrStore(status, m.requests.WithLabelValues(operation, strconv.Itoa(status)))
	}
	c.(prometheus.Counter).Inc() //nolint:forcetypeassert // requests holds nothing else
	o.duration.Observe(d.Seconds())
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
