package pipeline

import (
	"context"
	"crypto/ed25519"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/problem"
)

// authenticate establishes the actor for credential path auth, or returns the problem to answer:
// 401 for a bad credential (one code, no hint which part), 429 over a rate limit. A release
// command is the local operator on the operator path.
func (p *Pipeline) authenticate(r *http.Request, st *State, auth string) *problem.Error {
	if st.Local && (auth == AuthOperator || auth == AuthPublic) {
		st.Actor = Actor{Type: domain.ActorLocalOperator, ID: domain.LocalOperatorID, Name: domain.LocalOperatorID,
			CredentialID: domain.LocalOperatorID, InvocationID: st.Invocation}
		return nil
	}
	if auth == AuthPublic {
		return p.anonymousLimit(st)
	}
	var (
		actor  Actor
		err    = errBadCredential
		detail string
	)
	if !st.Local {
		ctx := r.Context()
		switch auth {
		case AuthOperator:
			actor, err = p.operatorToken(ctx, r, st)
			detail = operatorTokenDetail
		case AuthUser:
			actor, err = p.userKey(ctx, r)
			detail = "Send a valid personal API key: Authorization: Bearer renga_user_..."
		case AuthIntake:
			actor, err = p.intakeKey(ctx, r)
			detail = "Send a valid intake key: Authorization: Bearer renga_intake_..."
		case AuthInstallation:
			// The signature covers the body: read it (bounded) first.
			body, pe := readAll(r)
			if pe != nil {
				return pe
			}
			actor, err = p.installationSignature(ctx, r, st, body)
			detail = "Sign the request with the installation's key (Renga-Installation, Renga-Timestamp, Renga-Signature)."
		}
	}
	if err != nil {
		return p.authFailure(r, st, err, detail)
	}
	st.Actor = actor
	if !p.limits.allow(actor.CredentialID) {
		if refused := p.confirmToken(r, st); refused != nil {
			return refused // a revoked token is told 401, not that it was once allowed more
		}
		pe := problem.New(http.StatusTooManyRequests, api.ErrorCodeRateLimited, "This credential sends more requests than the deployment allows; slow down.")
		pe.RetryAfter = p.limits.retryAfter()
		return pe
	}
	return nil
}

// authFailure is the answer to a request whose credential did not authenticate (err).
func (p *Pipeline) authFailure(r *http.Request, st *State, err error, detail string) *problem.Error {
	if !errors.Is(err, errBadCredential) {
		// Not an authentication failure: the credential could not be checked. Never a 401 (a
		// client would conclude its credential is bad), and not counted against the address.
		pe := problem.FromError(err)
		if pe == nil || pe.Status != http.StatusServiceUnavailable {
			p.log.ErrorContext(r.Context(), "credential lookup failed", "request_id", st.ID, "error", err)
			pe = problem.Internal()
		}
		return pe
	}
	// A request that fails authentication is an unauthenticated request: limited per source
	// address, so guessing credentials is slow.
	if pe := p.anonymousLimit(st); pe != nil {
		return pe
	}
	return problem.New(http.StatusUnauthorized, api.ErrorCodeUnauthenticated, detail)
}

func (p *Pipeline) anonymousLimit(st *State) *problem.Error {
	bucket := st.sourceText // an IPv4 address's bucket is its text
	if bucket == "" {
		bucket = sourceBucket(st.Source)
	}
	if p.anon.allow(bucket) {
		return nil
	}
	pe := problem.New(http.StatusTooManyRequests, api.ErrorCodeRateLimited, "Too many unauthenticated requests from this address; slow down.")
	pe.RetryAfter = p.anon.retryAfter()
	return pe
}

// bearer is the one Authorization header's bearer credential, if it passes check (a cheap
// syntax check before any database work).
func bearer(r *http.Request, check func(string) bool) (string, bool) {
	values := r.Header["Authorization"] // its canonical key: see readBody
	if len(values) != 1 {
		return "", false
	}
	scheme, credential, ok := strings.Cut(values[0], " ")
	credential = strings.TrimSpace(credential)
	if !ok || !strings.EqualFold(scheme, "Bearer") || !check(credential) {
		return "", false
	}
	return credential, true
}

// errBadCredential: the request's credential is missing, malformed, unknown, expired, revoked,
// or not allowed from the source address (one answer, 401, with no hint which).
var errBadCredential = errors.New("bad credential")

// lookupFailed is the error of a credential lookup: errBadCredential when there is no such
// credential, else the failure itself (the database unreachable is a 503, never a 401).
func lookupFailed(err error) error {
	if errors.Is(err, domain.ErrNotFound) {
		return errBadCredential
	}
	return err
}

// operatorToken checks the bearer token: hash, expiry, revocation and source address, on every
// request. A read checks against the database, and a read with a Prefetch sends its read in the
// same round trip; its result is kept for the handler. A write may take the token from the cache
// (tokenCache): its transaction re-checks it before anything else, and a request the pipeline
// answers before its transaction confirms its cached token first (confirmToken), so a revoked
// token is answered 401 as the lookup would have.
func (p *Pipeline) operatorToken(ctx context.Context, r *http.Request, st *State) (Actor, error) {
	token, ok := bearer(r, domain.LooksLikeToken)
	if !ok {
		return Actor{}, errBadCredential
	}
	hash := domain.HashSecret(token)
	now := time.Now()
	// Not for a streamed upload: its deadlines are lifted before its transaction starts.
	if st.Op != nil && st.Op.Mutation && !st.Op.StreamedBody {
		if t, ok := p.tokens.get(hash, now); ok && t.Usable(now, st.Source) {
			st.cachedToken = hash
			return tokenActor(t), nil
		}
	}
	t, err := p.lookupToken(ctx, st, hash, now)
	if err != nil {
		return Actor{}, err
	}
	p.tokens.put(hash, t, now)
	return tokenActor(t), nil
}

const operatorTokenDetail = "Send a valid operator token: Authorization: Bearer renga_operator_..."

func tokenActor(t domain.Token) Actor {
	return Actor{Type: domain.ActorOperatorToken, ID: t.ID, Name: t.Name, Scopes: t.Scopes, CredentialID: t.ID}
}

// lookupToken reads the token whose secret hashes to hash, with the request's Prefetch if it has
// one, and returns it if it is usable now from the request's source.
func (p *Pipeline) lookupToken(ctx context.Context, st *State, hash []byte, now time.Time) (domain.Token, error) {
	batch := &pgx.Batch{}
	readToken := domain.QueueTokenForAuth(batch, hash)
	var readPrefetch func(pgx.BatchResults) (any, error)
	// Only IDs of the form the spec gives travel before validation: anything else is refused by
	// validation, and must not reach the database first (a NUL would fail the whole batch).
	if st.Op != nil && !st.Op.Mutation && st.wellFormed {
		if prefetch := p.opts.Prefetch[st.Op.ID]; prefetch != nil {
			readPrefetch = prefetch(st.pathParams, batch)
		}
	}
	br := p.pool.SendBatch(ctx, batch)
	t, storedHash, err := readToken(br)
	var pre *prefetched
	if readPrefetch != nil {
		// Read whatever the token's read found: the results are read in order.
		v, perr := readPrefetch(br)
		pre = &prefetched{v, perr}
	}
	if cerr := br.Close(); cerr != nil {
		err = cerr
	}
	if err != nil {
		return domain.Token{}, lookupFailed(err)
	}
	st.prefetched = pre
	if subtle.ConstantTimeCompare(storedHash, hash) != 1 || !t.Usable(now, st.Source) {
		return domain.Token{}, errBadCredential
	}
	return t, nil
}

// confirmToken checks, against the database, a token the request took from the cache, before
// the pipeline answers the request without its transaction (a refused scope, body, key or
// If-Match): it returns the answer to give instead when the token is no longer usable (401, as
// the lookup would have answered), or when it could not be checked (503).
func (p *Pipeline) confirmToken(r *http.Request, st *State) *problem.Error {
	if st.cachedToken == nil {
		return nil
	}
	// Its own deadline: the request's may have passed (a write that timed out is still answered
	// and audited as its token deserves).
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), confirmTimeout)
	defer cancel()
	if _, err := p.lookupToken(ctx, st, st.cachedToken, time.Now()); err != nil {
		return p.refuseCachedToken(r, st, err)
	}
	st.cachedToken = nil
	return nil
}

// confirmTimeout bounds confirmToken's lookup (one indexed read, which no lock holds up).
const confirmTimeout = 5 * time.Second

// refuseCachedToken answers a request whose token, taken from the cache, the database refused
// (err: errBadCredential, or why it could not be checked). A refused token leaves the cache, and
// the request is an unauthenticated one: no actor, no audit.
func (p *Pipeline) refuseCachedToken(r *http.Request, st *State, err error) *problem.Error {
	if errors.Is(err, errBadCredential) {
		p.tokens.forget(st.cachedToken)
		st.Actor = Actor{}
	}
	st.cachedToken = nil
	return p.authFailure(r, st, err, operatorTokenDetail)
}

// userKey checks a personal API key: one query for the key, the membership, the user and the
// organization.
func (p *Pipeline) userKey(ctx context.Context, r *http.Request) (Actor, error) {
	key, ok := bearer(r, domain.LooksLikeUserKey)
	if !ok {
		return Actor{}, errBadCredential
	}
	hash := domain.HashSecret(key)
	h, err := domain.KeyHolderByHash(ctx, p.pool, hash)
	if err != nil {
		return Actor{}, lookupFailed(err)
	}
	if subtle.ConstantTimeCompare(h.KeyHash, hash) != 1 || h.Organization.State == domain.StatePurging {
		return Actor{}, errBadCredential
	}
	return Actor{Type: domain.ActorUser, ID: h.User.ID, Name: h.User.DisplayName, CredentialID: h.KeyID,
		OrganizationID: h.Organization.ID, OrganizationName: h.Organization.DisplayName, OrganizationState: h.Organization.State,
		Role: h.Role}, nil
}

// intakeKey checks an intake key by the SHA-256 of the key without its deployment identifier:
// the identifier is never consulted, so a wrong or missing one still authenticates, and the
// right one with a wrong secret does not.
func (p *Pipeline) intakeKey(ctx context.Context, r *http.Request) (Actor, error) {
	key, ok := bearer(r, domain.LooksLikeIntakeKey)
	if !ok {
		return Actor{}, errBadCredential
	}
	hash := domain.HashIntakeKey(key)
	keyID, stored, org, err := domain.IntakeKeyHolder(ctx, p.pool, hash)
	if err != nil {
		return Actor{}, lookupFailed(err)
	}
	if subtle.ConstantTimeCompare(stored, hash) != 1 {
		return Actor{}, errBadCredential
	}
	return Actor{Type: domain.ActorIntakeKey, ID: keyID, Name: "intake key " + keyID, CredentialID: keyID,
		OrganizationID: org.ID, OrganizationName: org.Name, OrganizationState: org.State}, nil
}

var installationIDPattern = regexp.MustCompile(`^ins_[0-9a-z]{26}$`)

// installationSignature verifies a signed agent request: the timestamp within the skew, the
// installation known, and the Ed25519 signature over method, target, timestamp, installation
// and body digest valid under its registered public key.
func (p *Pipeline) installationSignature(ctx context.Context, r *http.Request, st *State, body []byte) (Actor, error) {
	// One of each header: with two, which one a signature covers would be ambiguous.
	for _, h := range []string{"Renga-Installation", "Renga-Timestamp", "Renga-Signature"} {
		if len(r.Header.Values(h)) != 1 {
			return Actor{}, errBadCredential
		}
	}
	id, ts, sig := r.Header.Get("Renga-Installation"), r.Header.Get("Renga-Timestamp"), r.Header.Get("Renga-Signature")
	if !installationIDPattern.MatchString(id) || len(ts) == 0 || len(ts) > 12 {
		return Actor{}, errBadCredential
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || strconv.FormatInt(unix, 10) != ts {
		return Actor{}, errBadCredential
	}
	if d := time.Since(time.Unix(unix, 0)); d > domain.SignatureSkew || d < -domain.SignatureSkew {
		return Actor{}, errBadCredential
	}
	encoded, ok := strings.CutPrefix(sig, "ed25519=")
	if !ok {
		return Actor{}, errBadCredential
	}
	signature, err := base64.StdEncoding.DecodeString(encoded)
	if err != nil || len(signature) != ed25519.SignatureSize {
		return Actor{}, errBadCredential
	}
	target := r.RequestURI
	if target == "" {
		target = r.URL.RequestURI()
	}
	message := []byte(domain.StringToSign(r.Method, target, ts, id, body))
	// A single-statement write (intake) may take the key from the cache: its statement checks
	// the key, the organization and the policy version again (see domain.InstallationCache).
	cache := p.opts.Installations
	if cache == nil || st.Op == nil || !st.Op.SingleStatement {
		cache = nil
	}
	var h domain.InstallationHolder
	verified := false
	if cache != nil {
		if c, ok := cache.Get(id); ok {
			if verified = ed25519.Verify(ed25519.PublicKey(c.Installation.PublicKey), message, signature); verified {
				h = c
			} else {
				cache.Forget(id) // perhaps another key now: look it up
			}
		}
	}
	if !verified {
		if h, err = domain.InstallationForAuth(ctx, p.pool, id); err != nil {
			return Actor{}, lookupFailed(err)
		}
		if !ed25519.Verify(ed25519.PublicKey(h.Installation.PublicKey), message, signature) {
			return Actor{}, errBadCredential
		}
		if cache != nil {
			cache.Put(h)
		}
	}
	st.Installation = &h
	st.Body, st.bodyRead = body, true
	return Actor{Type: domain.ActorInstallation, ID: id, Name: h.Installation.Hostname, CredentialID: id,
		OrganizationID: h.Org.ID, OrganizationName: h.Org.Name, OrganizationState: h.Org.State}, nil
}

// readAll reads the body, at most MaxBodyBytes.
func readAll(r *http.Request) ([]byte, *problem.Error) {
	if r.Body == nil || r.Body == http.NoBody { // net/http's body of a request that has none
		return nil, nil
	}
	src := http.MaxBytesReader(nil, r.Body, MaxBodyBytes)
	var body []byte
	var err error
	if n := r.ContentLength; n > 0 && n <= MaxBodyBytes {
		// Into a slice of the announced size: one allocation, where io.ReadAll grows its buffer
		// from 512 bytes. A body longer than announced (net/http's own never is) is read on.
		body = make([]byte, n)
		if _, err = io.ReadFull(src, body); err == nil {
			var one [1]byte
			if m, rerr := src.Read(one[:]); m > 0 || rerr == nil {
				rest, rerr := io.ReadAll(src)
				body, err = append(append(body, one[:m]...), rest...), rerr
			} else if rerr != io.EOF {
				err = rerr
			}
		}
	} else {
		body, err = io.ReadAll(src)
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, problem.Newf(http.StatusRequestEntityTooLarge, api.ErrorCodePayloadTooLarge, "The body exceeds %d bytes.", MaxBodyBytes)
		}
		return nil, problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The body could not be read.")
	}
	return body, nil
}
