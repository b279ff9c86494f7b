package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/pipeline"
)

// Deployment sign-in (DESIGN §6), outside the API: server-rendered pages, no script.
//
//	GET  /signin                 the providers that serve sign-in; who you are once signed in
//	GET  /signin?provider=SLUG   starts the OIDC flow with that provider's active revision
//	GET  /signin/test?capability opens a provider test (POST .../tests made the URL), once
//	GET  /signin/callback        the provider's redirect: verifies and signs in, or activates
//	POST /signout                ends the session (CSRF-protected)
//	GET  /signin/recover         the local recovery sign-in form (email and code)
//	POST /signin/recover         signs in with a local recovery (CSRF-protected; recover.go)
//
// A flow is bound to the browser that started it by a flow cookie: its value's digest is
// stored with the flow, and the value derives the nonce and the PKCE verifier, so neither is
// stored. The state is stored as its digest. Only the callback's flow, taken once, proceeds.
const (
	signInPath         = "/signin"
	signInTestPath     = "/signin/test"
	signInCallbackPath = "/signin/callback"
	signOutPath        = "/signout"
)

//go:embed signin.html
var signInHTML string

var signInPage = template.Must(template.New("signin").Funcs(pageFuncs).Parse(signInHTML))

// signInCSP allows no script at all; the one form posts to this origin.
const signInCSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

type signInView struct {
	Title        string
	Refusal      string
	Providers    []domain.SignInProvider
	Session      *domain.DeploymentSession
	ProviderName string
	CSRF         string
	Activated    *domain.IdentityProvider
	Email        string
	// Recover shows the local recovery form (CSRF is its token).
	Recover bool
}

func (s *Server) mountSignIn(mux *routeMux, pl *pipeline.Pipeline) {
	s.discovery = newDiscovery(s.cfg.ProviderCacheFreshness)
	mux.Handle("GET "+signInPath, pl.Public(http.HandlerFunc(s.signIn)))
	mux.Handle("GET "+signInTestPath, pl.Public(http.HandlerFunc(s.openProviderTest)))
	mux.Handle("GET "+signInCallbackPath, pl.Public(http.HandlerFunc(s.signInCallback)))
	mux.Handle("POST "+signOutPath, pl.Public(http.HandlerFunc(s.signOut)))
	mux.Handle("GET "+SignInRecoverPath, pl.Public(http.HandlerFunc(s.recoverForm)))
	mux.Handle("POST "+SignInRecoverPath, pl.Public(http.HandlerFunc(s.recoverSignIn)))
}

func (s *Server) render(w http.ResponseWriter, status int, v signInView) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", signInCSP)
	w.WriteHeader(status)
	_ = signInPage.Execute(w, v)
}

// refuse renders why a sign-in or a test failed: a SignInError's reason as it is, the
// provider unreachable as 503, anything else as a bare failure (logged).
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) int {
	var se *domain.SignInError
	var ue *unreachableError
	status, reason := http.StatusInternalServerError, "Sign-in failed on the deployment's side; try again later."
	switch {
	case errors.As(err, &se):
		status, reason = http.StatusForbidden, se.Reason
	case errors.As(err, &ue):
		status, reason = http.StatusServiceUnavailable, "The identity provider cannot be reached, so sign-in is refused; try again later."
	case db.Unavailable(err):
		status, reason = http.StatusServiceUnavailable, "The deployment cannot reach its database right now; try again later."
	}
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "2")
	}
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelWarn
	}
	s.log.Log(r.Context(), level, "sign-in refused", "request_id", pipeline.From(r.Context()).ID, "path", r.URL.Path, "status", status, "error", err)
	s.render(w, status, signInView{Title: "Sign-in refused", Refusal: reason})
	return status
}

// refusalCode is the error code an audit event of a refused sign-in, recovery sign-in or
// provider test carries: the refusal's own (a superseded revision's test: no_pending_revision),
// else by the status refuse answered, the API's codes for the same causes (a person not signed
// in: unauthenticated; the provider or the database unreachable: unavailable).
func refusalCode(err error, status int) string {
	if se := (*domain.SignInError)(nil); errors.As(err, &se) && se.Code != "" {
		return se.Code
	}
	switch status {
	case http.StatusForbidden:
		return string(api.ErrorCodeUnauthenticated)
	case http.StatusServiceUnavailable:
		return string(api.ErrorCodeUnavailable)
	default:
		return string(api.ErrorCodeInternal)
	}
}

// Cookies: __Host- names and Secure, except in development over plain http, where a browser
// would drop them (there they are renga_session and renga_signin).
func (s *Server) secureCookies() bool {
	return !s.cfg.Development() || !strings.HasPrefix(s.cfg.PublicURL, "http://")
}

func (s *Server) cookieName(base string) string {
	if s.secureCookies() {
		return "__Host-" + base
	}
	return base
}

// SessionCookie and FlowCookie are the cookies' names without the __Host- prefix.
const (
	SessionCookie = "renga_session"
	FlowCookie    = "renga_signin"
)

func (s *Server) setCookie(w http.ResponseWriter, base, value string, expires time.Time) {
	c := &http.Cookie{Name: s.cookieName(base), Value: value, Path: "/", HttpOnly: true, Secure: s.secureCookies(),
		SameSite: http.SameSiteLaxMode}
	if expires.IsZero() {
		c.MaxAge = -1
	} else {
		c.Expires, c.MaxAge = expires, int(time.Until(expires).Seconds())
	}
	http.SetCookie(w, c)
}

func (s *Server) cookie(r *http.Request, base string) string {
	c, err := r.Cookie(s.cookieName(base))
	if err != nil {
		return ""
	}
	return c.Value
}

// derive is a value the flow cookie determines (its nonce, its PKCE verifier): base64url of
// HMAC-SHA256 under the cookie's value.
func derive(flowSecret, purpose string) string {
	m := hmac.New(sha256.New, []byte(flowSecret))
	m.Write([]byte(purpose))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (s *Server) signIn(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p := s.providers()
	if slug := r.URL.Query().Get("provider"); slug != "" {
		sp, err := p.SignInProviderBySlug(ctx, s.pool, slug)
		if err != nil {
			s.refuse(w, r, err)
			return
		}
		cfg, err := p.RevisionConfig(ctx, s.pool, sp.ID, sp.Revision)
		if err != nil {
			s.refuse(w, r, err)
			return
		}
		s.redirectToProvider(w, r, cfg, func(stateHash, browserHash []byte) error {
			return domain.StartSignIn(ctx, s.pool, sp.ID, sp.Revision, stateHash, browserHash)
		})
		return
	}
	if secret := s.cookie(r, SessionCookie); secret != "" {
		sess, name, err := s.liveSession(ctx, secret)
		switch {
		case err == nil:
			s.render(w, http.StatusOK, signInView{Title: "Signed in", Session: &sess, ProviderName: name, CSRF: derive(secret, "signout")})
			return
		case !errors.Is(err, domain.ErrNotFound):
			s.refuse(w, r, err)
			return
		}
	}
	list, err := p.SignInProviders(ctx, s.pool)
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	s.render(w, http.StatusOK, signInView{Title: "Sign in", Providers: list})
}

// liveSession is the session whose cookie is secret, and its provider's display name ("local
// recovery" for a recovery's session). A session ends (revoked) when its provider no longer
// serves sign-in (disabled or deleted), or when the support source no longer names its person;
// a local recovery's session has no provider, so only the latter ends it.
func (s *Server) liveSession(ctx context.Context, secret string) (domain.DeploymentSession, string, error) {
	sess, err := domain.DeploymentSessionBySecret(ctx, s.pool, secret)
	if err != nil {
		return sess, "", err
	}
	list, err := s.providers().SignInProviders(ctx, s.pool)
	if err != nil {
		return sess, "", err
	}
	// A session is a support person's only while the support source names them.
	src, err := domain.GetSupportSource(ctx, s.pool)
	if err != nil {
		return sess, "", err
	}
	// A local recovery's session has no provider: it lives while the support source names
	// its person's email.
	if sess.Method == domain.MethodLocalRecovery && src.NamesEmail(sess.Email) {
		return sess, "local recovery", nil
	}
	for _, sp := range list {
		if sess.Method == domain.MethodOIDC && sp.ID == sess.ProviderID && src.Names(sess.ProviderID, sess.Email) {
			return sess, sp.DisplayName, nil
		}
	}
	if err := domain.RevokeDeploymentSession(ctx, s.pool, sess.ID); err != nil {
		return sess, "", err
	}
	return sess, "", domain.ErrNotFound
}

// openProviderTest opens a test URL: the issuer is discovered now, and only then is the
// single-use URL spent, so that an unreachable provider leaves the test to retry.
func (s *Server) openProviderTest(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	capability := r.URL.Query().Get("capability")
	flow, err := domain.PeekProviderTest(ctx, s.pool, capability)
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	p := s.providers()
	if err := p.CheckStillPending(ctx, s.pool, flow); err != nil {
		s.refuse(w, r, err)
		return
	}
	cfg, err := p.RevisionConfig(ctx, s.pool, flow.ProviderID, flow.Revision)
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	s.redirectToProvider(w, r, cfg, func(stateHash, browserHash []byte) error {
		_, err := domain.OpenProviderTest(ctx, s.pool, capability, stateHash, browserHash)
		return err
	})
}

// redirectToProvider sends the browser to the provider's authorization endpoint with a new
// state, nonce and PKCE challenge; record stores the flow (state and browser digests).
func (s *Server) redirectToProvider(w http.ResponseWriter, r *http.Request, cfg domain.SignInConfig, record func(stateHash, browserHash []byte) error) {
	op, err := s.discovery.provider(r.Context(), cfg.Issuer)
	if err != nil {
		s.refuse(w, r, err)
		return
	}
	flowSecret, state := domain.NewSecret(), domain.NewSecret()
	if err := record(domain.HashSecret(state), domain.HashSecret(flowSecret)); err != nil {
		s.refuse(w, r, err)
		return
	}
	s.setCookie(w, FlowCookie, flowSecret, time.Now().Add(domain.SignInFlowLifetime))
	to := s.oauth2Config(cfg, op).AuthCodeURL(state, oidc.Nonce(derive(flowSecret, "nonce")),
		oauth2.S256ChallengeOption(derive(flowSecret, "pkce")))
	http.Redirect(w, r, to, http.StatusSeeOther)
}

func (s *Server) oauth2Config(cfg domain.SignInConfig, op *oidc.Provider) *oauth2.Config {
	return &oauth2.Config{ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret, Endpoint: op.Endpoint(),
		RedirectURL: s.cfg.PublicURL + signInCallbackPath, Scopes: cfg.Scopes}
}

// signOut revokes the session. The form carries a CSRF token derived from the session
// cookie (which a cross-site page cannot read), and a cross-origin Origin is refused.
func (s *Server) signOut(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if origin := r.Header.Get("Origin"); origin != "" && origin != publicOrigin(s.cfg.PublicURL) {
		s.refuse(w, r, &domain.SignInError{Reason: "Signing out must come from this deployment's own page."})
		return
	}
	secret := s.cookie(r, SessionCookie)
	if secret == "" {
		http.Redirect(w, r, signInPath, http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(derive(secret, "signout"))) != 1 {
		s.refuse(w, r, &domain.SignInError{Reason: "The sign-out form is stale or not this deployment's: open the sign-in page and sign out there."})
		return
	}
	sess, err := domain.DeploymentSessionBySecret(ctx, s.pool, secret)
	if err == nil {
		err = domain.RevokeDeploymentSession(ctx, s.pool, sess.ID)
	}
	if err != nil && !errors.Is(err, domain.ErrNotFound) {
		s.refuse(w, r, err)
		return
	}
	s.setCookie(w, SessionCookie, "", time.Time{})
	http.Redirect(w, r, signInPath, http.StatusSeeOther)
}

func publicOrigin(publicURL string) string {
	u, err := url.Parse(publicURL)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

func sourceString(st *pipeline.State) string {
	if st.Source.IsValid() {
		return st.Source.String()
	}
	return "unknown"
}
