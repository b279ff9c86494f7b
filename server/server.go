package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"golang.org/x/time/rate"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/problem"
)

// Server implements the generated strict interface over the domain functions.
type Server struct {
	cfg     Config
	pool    *pgxpool.Pool
	log     *slog.Logger
	limits  *limiters // per credential
	anon    *limiters // per source address, for unauthenticated requests
	metrics *metrics
	handler http.Handler
	jobs    *river.Client[pgx.Tx]
}

var _ api.StrictServerInterface = (*Server)(nil)

// New builds the server and its HTTP handler.
func New(cfg Config, pool *pgxpool.Pool, log *slog.Logger) (*Server, error) {
	s := &Server{cfg: cfg, pool: pool, log: log, metrics: newMetrics(),
		limits: newLimiters(cfg.RateLimitAuthenticated, cfg.RateLimitAuthenticatedBurst),
		anon:   newLimiters(cfg.RateLimitAnonymous, cfg.RateLimitAnonymousBurst)}
	var err error
	if s.jobs, err = newJobClient(pool, cfg, log); err != nil {
		return nil, fmt.Errorf("job client: %w", err)
	}
	strict := api.NewStrictHandlerWithOptions(s, nil, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The request could not be read.")
			problem.Write(w, stateFrom(r.Context()).ID, pe)
		},
		ResponseErrorHandlerFunc: s.writeError,
	})
	apiMux := http.NewServeMux()
	generated := api.HandlerWithOptions(strict, api.StdHTTPServerOptions{
		BaseRouter: apiMux,
		ErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The request's parameters could not be read.")
			problem.Write(w, stateFrom(r.Context()).ID, pe)
		},
	})
	pl, err := newPipeline(s, generated)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", pl)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /invitations/accept", serveAcceptPage)
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		problem.Write(w, stateFrom(r.Context()).ID, problem.Newf(http.StatusNotFound, api.ErrorCodeNotFound, "Nothing at %s.", r.URL.Path))
	})
	s.handler = logRequests(log, s.metrics, cfg.TrustedProxies, mux)
	return s, nil
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

// q is the database handle for this request: the mutation's transaction, or the pool.
func (s *Server) q(ctx context.Context) db.DBTX {
	if st := stateFrom(ctx); st.Tx != nil {
		return st.Tx
	}
	return s.pool
}

// authenticate checks the bearer token: hash, expiry, revocation and source address, on every
// request, against the database (no cache can let a revoked token through).
func (s *Server) authenticate(ctx context.Context, r *http.Request, source netip.Addr) (Actor, bool) {
	if len(r.Header.Values("Authorization")) != 1 {
		return Actor{}, false
	}
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return Actor{}, false
	}
	token = strings.TrimSpace(token)
	if !domain.LooksLikeToken(token) {
		return Actor{}, false
	}
	hash := domain.HashSecret(token)
	t, storedHash, err := domain.TokenByHashForAuth(ctx, s.pool, hash)
	if err != nil {
		if !errors.Is(err, db.ErrNotFound) {
			s.log.ErrorContext(ctx, "token lookup failed", "error", err)
		}
		return Actor{}, false
	}
	if subtle.ConstantTimeCompare(storedHash, hash) != 1 || !t.Usable(time.Now(), source) {
		return Actor{}, false
	}
	return Actor{Type: domain.ActorOperatorToken, ID: t.ID, Name: t.Name, Scopes: t.Scopes, CredentialID: t.ID}, true
}

// authenticateUser checks a personal API key: one query for the key, the membership, the user
// and the organization.
func (s *Server) authenticateUser(ctx context.Context, r *http.Request) (Actor, bool) {
	if len(r.Header.Values("Authorization")) != 1 {
		return Actor{}, false
	}
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	key = strings.TrimSpace(key)
	if !ok || !strings.EqualFold(scheme, "Bearer") || !domain.LooksLikeUserKey(key) {
		return Actor{}, false
	}
	hash := domain.HashSecret(key)
	h, err := domain.KeyHolderByHash(ctx, s.pool, hash)
	if err != nil {
		if !errors.Is(err, db.ErrNotFound) {
			s.log.ErrorContext(ctx, "API key lookup failed", "error", err)
		}
		return Actor{}, false
	}
	if subtle.ConstantTimeCompare(h.KeyHash, hash) != 1 || h.Organization.State == domain.StatePurging {
		return Actor{}, false
	}
	return Actor{Type: domain.ActorUser, ID: h.User.ID, Name: h.User.DisplayName, CredentialID: h.KeyID,
		OrganizationID: h.Organization.ID, OrganizationName: h.Organization.DisplayName, OrganizationState: h.Organization.State,
		Role: h.Role}, true
}

// writeError renders a handler's error: domain errors map to their problems here, in one place;
// anything unexpected is logged and becomes a bare 500.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	st := stateFrom(r.Context())
	var pe *problem.Error
	var vm *domain.VersionMismatchError
	var le *domain.LimitError
	var dl *domain.DailyLimitError
	var ne *domain.NotEntitledError
	var sl *domain.SettingLockedError
	var ve *domain.ValidationError
	switch {
	case errors.As(err, &pe):
	case errors.Is(err, db.ErrNotFound):
		pe = problem.New(http.StatusNotFound, api.ErrorCodeNotFound, "No such resource.")
	case errors.Is(err, domain.ErrSlugTaken):
		pe = problem.New(http.StatusConflict, api.ErrorCodeSlugTaken, "Another organization has this slug.")
	case errors.Is(err, domain.ErrInvalidState):
		pe = problem.New(http.StatusConflict, api.ErrorCodeInvalidState, "The organization's state does not allow this change.")
	case errors.Is(err, domain.ErrPurgeStarted):
		pe = problem.New(http.StatusConflict, api.ErrorCodePurgeStarted, "The organization is being purged; nothing can stop or change that.")
	case errors.Is(err, domain.ErrInvitationExpired):
		pe = problem.New(http.StatusGone, api.ErrorCodeInvitationExpired, "The invitation has expired; ask for a new one.")
	case errors.Is(err, domain.ErrInvitationRevoked):
		pe = problem.New(http.StatusGone, api.ErrorCodeInvitationRevoked, "The invitation was revoked; ask for a new one.")
	case errors.Is(err, domain.ErrInvitationAccepted):
		pe = problem.New(http.StatusGone, api.ErrorCodeInvitationAccepted, "The invitation was already accepted.")
	case errors.Is(err, domain.ErrSuspended):
		pe = problem.New(http.StatusForbidden, api.ErrorCodeSuspended, "The organization is suspended or being deleted.")
	case errors.Is(err, domain.ErrMoved):
		pe = problem.New(http.StatusGone, api.ErrorCodeMoved, "The organization has moved to another deployment.")
	case errors.As(err, &dl):
		pe = problem.Newf(http.StatusTooManyRequests, api.ErrorCodeLimitExceeded, "The organization's %s (%d) is used up for today (UTC).", dl.Limit, dl.Value)
		pe.RetryAfter = untilNextUTCMidnight(time.Now())
	case errors.As(err, &ne):
		pe = problem.Newf(http.StatusForbidden, api.ErrorCodeNotEntitled, "The organization is not entitled to %s.", ne.Entitlement)
	case errors.Is(err, domain.ErrInstallationConflict):
		pe = problem.New(http.StatusConflict, api.ErrorCodeInstallationConflict, "This installation ID is registered with another public key.")
	case errors.As(err, &le):
		pe = problem.Newf(http.StatusForbidden, api.ErrorCodeLimitExceeded, "The organization's %s limit (%d) is reached.", le.Limit, le.Value)
	case errors.As(err, &sl):
		pe = problem.Newf(http.StatusConflict, api.ErrorCodeSettingLocked, "%s is locked by the deployment's policy for this organization.", sl.Field)
		pe.Errors = []problem.FieldError{{Field: sl.Field, Message: "locked"}}
	case errors.As(err, &ve):
		pe = problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The request does not match the API description; see errors.")
		pe.Errors = []problem.FieldError{{Field: ve.Field, Message: ve.Message}}
	case errors.As(err, &vm):
		pe = problem.Newf(http.StatusPreconditionFailed, api.ErrorCodeVersionMismatch,
			"The If-Match version is not the current one (%d); read it again and reapply your change.", vm.Current)
		pe.CurrentVersion = &vm.Current
	default:
		s.log.ErrorContext(r.Context(), "request failed", "request_id", st.ID, "error", err)
		pe = problem.Internal()
	}
	problem.Write(w, st.ID, pe)
}

// limiters hold one token bucket per credential.
type limiters struct {
	mu    sync.Mutex
	rate  rate.Limit
	burst int
	m     map[string]*rate.Limiter
}

func newLimiters(perSecond float64, burst int) *limiters {
	return &limiters{rate: rate.Limit(perSecond), burst: burst, m: map[string]*rate.Limiter{}}
}

// retryAfter is how many whole seconds a caller over the limit should wait for one request.
func (l *limiters) retryAfter() int {
	if l.rate <= 0 {
		return 1
	}
	return max(1, int(math.Ceil(1/float64(l.rate))))
}

func (l *limiters) allow(key string) bool {
	if l.rate <= 0 {
		return true
	}
	l.mu.Lock()
	lim, ok := l.m[key]
	if !ok {
		if len(l.m) >= maxLimiters {
			l.sweep()
		}
		lim = rate.NewLimiter(l.rate, l.burst)
		l.m[key] = lim
	}
	l.mu.Unlock()
	return lim.Allow()
}

// maxLimiters bounds the memory many distinct callers can make the server hold.
const maxLimiters = 10000

// sweep forgets buckets that have refilled: forgetting them changes nothing for their callers.
// If too many are still busy, it forgets the fullest half (the least active callers), so that
// a flood of new addresses cannot reset the buckets of the busiest ones.
func (l *limiters) sweep() {
	now := time.Now()
	for k, lim := range l.m {
		if lim.TokensAt(now) >= float64(l.burst) {
			delete(l.m, k)
		}
	}
	if len(l.m) < maxLimiters {
		return
	}
	type bucket struct {
		key    string
		tokens float64
	}
	all := make([]bucket, 0, len(l.m))
	for k, lim := range l.m {
		all = append(all, bucket{k, lim.TokensAt(now)})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].tokens > all[j].tokens })
	for _, b := range all[:len(all)/2] {
		delete(l.m, b.key)
	}
}
