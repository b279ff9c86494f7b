// Package oidctest runs a real OpenID Provider in the test process: zitadel/oidc's certified
// pkg/op on an httptest server, with an RSA key made per provider, discovery, the authorization
// code flow with PKCE (required: a request without an S256 code challenge is refused), and
// users the test defines. Its login step is plain HTTP: the authorization endpoint redirects to
// a login page (LoginPath) whose form the test POSTs a username to.
package oidctest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// LoginPath is the provider's login page: GET shows a form, POST takes `id` (the
// authorization request's ID, from the page's query `authRequestID`) and `username`.
const LoginPath = "/login"

// User is a person the provider can sign in.
type User struct {
	Username      string // what the login form takes
	Subject       string // the ID token's sub (defaults to "sub-" + Username)
	Email         string
	EmailVerified bool
	Name          string
}

// Provider is a running OpenID Provider with one confidential client.
type Provider struct {
	Issuer       string
	ClientID     string
	ClientSecret string

	server  *httptest.Server
	storage *storage
}

// Start runs a provider until t ends. Its client (a random ID and secret) accepts any
// redirect URI listed in redirectURIs.
func Start(t testing.TB, redirectURIs []string, users ...User) *Provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	st := &storage{
		key:      key,
		keyID:    randomString(8),
		users:    map[string]User{},
		requests: map[string]*authRequest{},
		codes:    map[string]string{},
	}
	st.client = &client{id: "client-" + randomString(8), secret: "client-secret-" + randomString(24), redirectURIs: redirectURIs}
	for _, u := range users {
		st.addUser(u)
	}
	srv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + srv.Listener.Addr().String()
	var cryptoKey [32]byte
	_, _ = rand.Read(cryptoKey[:])
	provider, err := op.NewProvider(&op.Config{
		CryptoKey:      cryptoKey,
		CodeMethodS256: true,
		AuthMethodPost: true,
	}, st, op.StaticIssuer(issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	interceptor := op.NewIssuerInterceptor(provider.IssuerFromRequest)
	callback := op.AuthCallbackURL(provider)
	mux.Handle(LoginPath, interceptor.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st.login(w, r, callback)
	}))
	mux.Handle("/", provider)
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == oidc.DiscoveryEndpoint {
			st.mu.Lock()
			st.discoveryCount++
			st.mu.Unlock()
		}
		mux.ServeHTTP(w, r)
	})
	srv.Start()
	t.Cleanup(srv.Close)
	return &Provider{Issuer: issuer, ClientID: st.client.id, ClientSecret: st.client.secret, server: srv, storage: st}
}

// AddUser adds (or replaces) a user.
func (p *Provider) AddUser(u User) { p.storage.addUser(u) }

// Stop stops the provider's HTTP server: from now on it is unreachable.
func (p *Provider) Stop() { p.server.Close() }

// IssueNonce makes the provider put nonce in the ID tokens it issues from now on, instead of
// the one the client sent (a misbehaving or replaying provider); "" restores the client's.
func (p *Provider) IssueNonce(nonce string) {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	p.storage.nonce = nonce
}

// Requests is how many authorization requests the provider received.
func (p *Provider) Requests() int {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	return p.storage.requestCount
}

// DiscoveryRequests is how many times the discovery document was fetched.
func (p *Provider) DiscoveryRequests() int {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	return p.storage.discoveryCount
}

// SignIn drives the provider's side of a sign-in with plain HTTP: authorizeURL is where the
// relying party redirected the browser (the provider's authorization endpoint with its
// parameters); SignIn follows it to the login page, signs in as username and returns the
// redirect back to the relying party (its redirect URI with code and state).
func (p *Provider) SignIn(authorizeURL, username string) (*url.URL, error) {
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(authorizeURL)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	login, err := resp.Location()
	if err != nil {
		return nil, fmt.Errorf("authorization endpoint answered %d without a redirect to the login page", resp.StatusCode)
	}
	id := login.Query().Get("authRequestID")
	resp, err = c.PostForm(p.Issuer+LoginPath, url.Values{"id": {id}, "username": {username}})
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	callback, err := resp.Location()
	if err != nil {
		return nil, fmt.Errorf("login answered %d", resp.StatusCode)
	}
	// The login redirects to the provider's own authorization callback, which redirects to the
	// relying party with the code.
	resp, err = c.Get(callback.String())
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	back, err := resp.Location()
	if err != nil {
		return nil, fmt.Errorf("authorization callback answered %d", resp.StatusCode)
	}
	return back, nil
}

func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html>
<title>Test provider: sign in</title>
<form method="post" action="{{.Path}}">
<input type="hidden" name="id" value="{{.ID}}">
<label>Username <input name="username"></label>
<button type="submit">Sign in</button>
</form>`))

// login is the provider's login page: the person is whoever the username names (no
// password: this provider exists for tests).
func (s *storage) login(w http.ResponseWriter, r *http.Request, callback func(context.Context, string) string) {
	switch r.Method {
	case http.MethodGet:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = loginPage.Execute(w, map[string]string{"Path": LoginPath, "ID": r.URL.Query().Get("authRequestID")})
	case http.MethodPost:
		id, username := r.PostFormValue("id"), r.PostFormValue("username")
		s.mu.Lock()
		u, known := s.users[username]
		req, ok := s.requests[id]
		if known && ok {
			req.subject, req.authTime, req.done = u.Subject, time.Now(), true
		}
		s.mu.Unlock()
		if !known || !ok {
			http.Error(w, "unknown user or authorization request", http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, callback(r.Context(), id), http.StatusFound)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

// storage is the provider's state, in memory: what op.Storage asks for, and no more than the
// authorization code flow needs (no refresh tokens, no client credentials, no device flow).
type storage struct {
	mu             sync.Mutex
	key            *rsa.PrivateKey
	keyID          string
	client         *client
	users          map[string]User         // by username
	requests       map[string]*authRequest // by ID
	codes          map[string]string       // code → request ID
	nonce          string                  // IssueNonce
	requestCount   int
	discoveryCount int
}

var _ op.Storage = (*storage)(nil)

func (s *storage) addUser(u User) {
	if u.Subject == "" {
		u.Subject = "sub-" + u.Username
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[u.Username] = u
}

func (s *storage) userBySubject(sub string) (User, bool) {
	for _, u := range s.users {
		if u.Subject == sub {
			return u, true
		}
	}
	return User{}, false
}

type authRequest struct {
	id            string
	req           oidc.AuthRequest
	nonce         string
	subject       string
	authTime      time.Time
	done          bool
	codeChallenge *oidc.CodeChallenge
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return []string{a.req.ClientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.req.ClientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.codeChallenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.req.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.req.ResponseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.req.ResponseMode }
func (a *authRequest) GetScopes() []string                   { return a.req.Scopes }
func (a *authRequest) GetState() string                      { return a.req.State }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

var errNotFound = errors.New("not found")

func (s *storage) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requestCount++
	if req.CodeChallenge == "" || req.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("this provider requires PKCE with S256")
	}
	a := &authRequest{id: randomString(16), req: *req, nonce: req.Nonce,
		codeChallenge: &oidc.CodeChallenge{Challenge: req.CodeChallenge, Method: req.CodeChallengeMethod}}
	if s.nonce != "" {
		a.nonce = s.nonce
	}
	s.requests[a.id] = a
	return a, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.requests[id]; ok {
		return a, nil
	}
	return nil, errNotFound
}

func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.requests[s.codes[code]]; ok {
		return a, nil
	}
	return nil, errNotFound
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

// DeleteAuthRequest is called when a code is exchanged: the code is single use.
func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(context.Context, op.TokenRequest) (string, time.Time, error) {
	return randomString(16), time.Now().Add(5 * time.Minute), nil
}

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errors.New("this provider issues no refresh tokens")
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

func (s *storage) RevokeToken(context.Context, string, string, string) *oidc.Error { return nil }

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return k.id }

type publicKey struct {
	id  string
	key *rsa.PublicKey
}

func (k publicKey) ID() string                         { return k.id }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return k.key }

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	return signingKey{id: s.keyID, key: s.key}, nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{id: s.keyID, key: &s.key.PublicKey}}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if id != s.client.id {
		return nil, errNotFound
	}
	return s.client, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if id != s.client.id || secret != s.client.secret {
		return errors.New("wrong client ID or secret")
	}
	return nil
}

func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

// SetUserinfoFromRequest puts the user's claims in the ID token, as its scopes allow.
func (s *storage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.userBySubject(req.GetSubject())
	if !ok {
		return errNotFound
	}
	info.Subject = u.Subject
	if slices.Contains(scopes, oidc.ScopeEmail) {
		info.Email, info.EmailVerified = u.Email, oidc.Bool(u.EmailVerified)
	}
	if slices.Contains(scopes, oidc.ScopeProfile) {
		info.Name = u.Name
	}
	return nil
}

func (s *storage) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return errors.New("this provider serves no userinfo")
}

func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errors.New("this provider serves no introspection")
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errNotFound
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("this provider has no JWT profile grant")
}

func (s *storage) Health(context.Context) error { return nil }

// client is the provider's one confidential client (client_secret_basic or _post).
type client struct {
	id, secret   string
	redirectURIs []string
}

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return c.redirectURIs }
func (c *client) PostLogoutRedirectURIs() []string    { return nil }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType { return []oidc.GrantType{oidc.GrantTypeCode} }
func (c *client) LoginURL(id string) string {
	return LoginPath + "?authRequestID=" + url.QueryEscape(id)
}
func (c *client) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration       { return 5 * time.Minute }
func (c *client) DevMode() bool                        { return true } // http redirect URIs in tests
func (c *client) IsScopeAllowed(string) bool           { return false }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *client) ClockSkew() time.Duration             { return 0 }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
