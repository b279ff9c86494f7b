package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
	"renga.dev/renga/server/problem"
)

// Server implements the generated strict interface over the domain functions. Every API
// request reaches it through the pipeline (server/pipeline), which routes it once, runs the
// stages and, for a write, holds its transaction.
type Server struct {
	cfg     Config
	pool    *pgxpool.Pool
	log     *slog.Logger
	handler http.Handler
	jobs    *river.Client[pgx.Tx]
	// discovery caches identity providers' discovery documents and keys for sign-in.
	discovery *discovery
	// installations caches installations' keys for intake (see domain.InstallationCache).
	installations *domain.InstallationCache
	// intake sends concurrent batches together (domain.IntakeGroups).
	intake *domain.IntakeGroups
	// routes are the mux's patterns (Routes).
	routes []string
	// home is GetHome's answer, encoded once (held as the interface GetHome returns: a slice
	// converted to an interface on every request would be copied to the heap each time).
	home api.GetHomeResponseObject
	// intakeMargin is intakeExactMargin's answer, fixed with the pool's size (pgxpool's Config
	// copies the whole configuration on each call: not a thing to do per batch).
	intakeMargin int64
}

var _ api.StrictServerInterface = (*Server)(nil)

// LocalTransport serves a release command's requests in this process, as the local operator.
type LocalTransport = pipeline.LocalTransport

// NewInvocationID identifies one run of a release command.
func NewInvocationID() string { return pipeline.NewInvocationID() }

// New builds the server and its HTTP handler.
func New(cfg Config, pool *pgxpool.Pool, log *slog.Logger) (*Server, error) {
	// Intake's statements each hold a connection while they run: the API needs one left.
	if n := pool.Config().MaxConns; cfg.IntakeStatements >= int(n) {
		return nil, fmt.Errorf("RENGA_INTAKE_STATEMENTS (%d) must be below the database pool size (%d, RENGA_DATABASE_MAX_CONNS), so that the API keeps a connection while intake is busy",
			cfg.IntakeStatements, n)
	}
	s := &Server{cfg: cfg, pool: pool, log: log, installations: domain.NewInstallationCache(100_000)}
	s.intake = domain.NewIntakeGroups(pool, cfg.IntakeStatements, pipeline.MaxBodyBytes, cfg.IntakePath)
	s.intakeMargin = intakeExactMargin(pool.Config().MaxConns)
	if len(cfg.IdentityProviders) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := s.providers().CheckEnvProviders(ctx, pool)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("RENGA_IDENTITY_PROVIDERS: %w", err)
		}
	}
	home, err := newHomeAnswer(cfg.PublicURL)
	if err != nil {
		return nil, fmt.Errorf("home document: %w", err)
	}
	s.home = home
	if s.jobs, err = newJobClient(pool, cfg, log); err != nil {
		return nil, fmt.Errorf("job client: %w", err)
	}
	pl, err := s.newPipeline(home)
	if err != nil {
		return nil, err
	}
	mux := &routeMux{ServeMux: http.NewServeMux()}
	mux.Handle("/api/", pl)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /invitations/accept", serveAcceptPage)
	s.mountSignIn(mux, pl)
	s.mountSupport(mux, pl)
	mux.Handle("GET /metrics", pl.MetricsHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		pipeline.Fail(w, r, problem.Newf(http.StatusNotFound, api.ErrorCodeNotFound, "Nothing at %s.", r.URL.Path))
	})
	s.routes = mux.patterns
	for _, pattern := range mux.patterns { // apiFirst would hide it
		path := pattern
		if _, p, ok := strings.Cut(pattern, " "); ok {
			path = p
		}
		if pattern != "/api/" && strings.HasPrefix(path, "/api/") {
			return nil, fmt.Errorf("%s is mounted under /api/, which only the pipeline serves", pattern)
		}
	}
	s.handler = pl.AccessLog(apiFirst{api: pl, rest: mux})
	return s, nil
}

// newPipeline makes the API's pipeline and mounts the generated handlers on it.
func (s *Server) newPipeline(home http.Handler) (*pipeline.Pipeline, error) {
	cfg := s.cfg
	pl, err := pipeline.New(pipeline.Options{
		Development:                 cfg.Development(),
		TrustedProxies:              cfg.TrustedProxies,
		IdempotencyRetention:        cfg.IdempotencyRetention,
		RateLimitAuthenticated:      cfg.RateLimitAuthenticated,
		RateLimitAuthenticatedBurst: cfg.RateLimitAuthenticatedBurst,
		RateLimitAnonymous:          cfg.RateLimitAnonymous,
		RateLimitAnonymousBurst:     cfg.RateLimitAnonymousBurst,
		RequestTimeout:              cfg.RequestTimeout,
		MaxInFlight:                 cfg.MaxInFlight,
		InFlightWait:                time.Second,
		Prefetch:                    prefetches,
		Installations:               s.installations,
		Direct:                      map[string]http.Handler{"getHome": home},
	}, s.pool, s.log)
	if err != nil {
		return nil, err
	}
	pl.RegisterMetrics(s.intakeMetrics()...)
	strict := api.NewStrictHandlerWithOptions(s, nil, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, _ error) {
			pipeline.Fail(w, r, problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The request could not be read."))
		},
		ResponseErrorHandlerFunc: s.writeError,
	})
	api.HandlerWithOptions(strict, api.StdHTTPServerOptions{
		BaseRouter: pl,
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, _ error) {
			pipeline.Fail(w, r, problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The request's parameters could not be read."))
		},
	})
	if err := pl.Err(); err != nil {
		return nil, fmt.Errorf("spec and generated handlers disagree: %w", err)
	}
	return pl, nil
}

// apiFirst hands a request under /api/ to the pipeline directly, where the mux would send it
// after matching it against every pattern (nothing else is mounted under /api/), and any other
// to the mux: the API's requests are routed once, by the pipeline's own mux.
type apiFirst struct {
	api  http.Handler
	rest *routeMux
}

func (h apiFirst) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/api/") {
		h.api.ServeHTTP(w, r)
		return
	}
	h.rest.ServeHTTP(w, r)
}

// routeMux is the deployment's mux; it remembers the patterns it serves, so that a test can
// walk every route there is (the API's operations are the spec's, under /api/).
type routeMux struct {
	*http.ServeMux
	patterns []string
}

func (m *routeMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *routeMux) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	m.Handle(pattern, http.HandlerFunc(h))
}

// Routes are the patterns of every route the handler serves, in the order they were mounted:
// "/api/" (the spec's operations) and the pages, health and metrics outside the API.
func (s *Server) Routes() []string { return append([]string(nil), s.routes...) }

// prefetches are the operator reads by ID that travel in one round trip with the token's check
// (pipeline.Prefetch); their handlers take the result with pipeline.Prefetched.
var prefetches = map[string]pipeline.Prefetch{
	"getOrganization": prefetch(domain.QueueGetOrganization, "organization_id"),
	"getPolicy":       prefetch(domain.QueueGetPolicy, "organization_id"),
}

// prefetch is the Prefetch of a domain read by the ID in the path parameter param.
func prefetch[T any](queue func(*pgx.Batch, string) func(pgx.BatchResults) (T, error), param string) pipeline.Prefetch {
	return func(path map[string]string, b *pgx.Batch) func(pgx.BatchResults) (any, error) {
		read := queue(b, path[param])
		return func(br pgx.BatchResults) (any, error) { return read(br) }
	}
}

// Handler is the whole HTTP surface: the API, health, readiness and metrics.
func (s *Server) Handler() http.Handler { return s.handler }

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	st, err := db.Status(ctx, s.pool)
	switch {
	case err != nil:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("database unreachable\n"))
	case st.Pending > 0:
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("migrations pending: run renga migrate\n"))
	default:
		_, _ = w.Write([]byte("ready\n"))
	}
}

// q is the database handle for this request: the write's transaction, or the pool.
func (s *Server) q(ctx context.Context) db.DBTX {
	if st := pipeline.From(ctx); st.Tx != nil {
		return st.Tx
	}
	return s.pool
}

// writeError renders a handler's error: a domain error becomes its problem (server/problem's
// one table); anything unexpected is logged and becomes a bare 500.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	pe := problem.FromError(err)
	if pe == nil {
		s.log.ErrorContext(r.Context(), "request failed", "request_id", pipeline.From(r.Context()).ID, "error", err)
		pe = problem.Internal()
	}
	pipeline.Fail(w, r, pe)
}
