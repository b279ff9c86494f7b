package domain

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
)

// Deployment sign-in (DESIGN §6): a sign-in flow is one trip through a provider, from the
// deployment to the provider and back to /signin/callback. Purpose signin uses a provider's
// active revision and ends in a deployment session; purpose test is bound to one pending
// revision and ends, if that revision is still the pending one, in its activation. A flow is
// single use. Nothing secret is stored: capabilities, states, browser bindings and session
// cookies only as SHA-256.

// Sign-in flow purposes.
const (
	PurposeSignIn = "signin"
	PurposeTest   = "test"
)

// SignInFlowLifetime bounds a flow: a test URL works that long after the test starts, and a
// person has that long at the provider.
const SignInFlowLifetime = 10 * time.Minute

// OperationActivateProvider is the audit operation of a test's activation (no API operation:
// the callback activates).
const OperationActivateProvider = "activateIdentityProvider"

// OperationSignIn is the audit operation of a deployment sign-in through an identity provider
// (no API operation: the callback makes the session).
const OperationSignIn = "signIn"

// SignInAudit is the audit event of a sign-in through an identity provider: by the session it
// made (actor support_person: the session's ID, the person's email), or, refused, by
// "anonymous" with the email the provider verified.
func SignInAudit(providerID, sessionID, email, requestID, source, outcome string, status int, code string) AuditEvent {
	e := AuditEvent{RequestID: requestID, ActorType: ActorSupportPerson, ActorID: sessionID, ActorName: email,
		Operation: OperationSignIn, ProviderID: &providerID, Outcome: outcome, Status: status, SourceAddress: source,
		ChangedFields: []string{}}
	if e.ActorID == "" {
		e.ActorID = "anonymous"
	}
	if outcome == OutcomeSucceeded {
		e.ChangedFields = []string{"session"}
	}
	if code != "" {
		e.Error = &code
	}
	return e
}

// SignInFlow is a flow as the callback reads it.
type SignInFlow struct {
	ID         string
	Purpose    string
	ProviderID string
	Revision   int64
	TokenID    *string // a test: the operator token that started it
	TokenName  *string
	ExpiresAt  time.Time
}

const flowColumns = `id, purpose, provider_id, revision, token_id, token_name, expires_at`

func scanFlow(row pgx.Row) (SignInFlow, error) {
	var f SignInFlow
	err := row.Scan(&f.ID, &f.Purpose, &f.ProviderID, &f.Revision, &f.TokenID, &f.TokenName, &f.ExpiresAt)
	return f, db.Translate(err)
}

// ProviderTest is a started test.
type ProviderTest struct {
	Revision   int64
	ExpiresAt  time.Time
	Capability string // the test URL's secret: returned once, stored as its digest
}

// StartProviderTest binds a test to the provider's pending revision, for the operator token
// tokenID (named tokenName) that asks. The issuer is not contacted yet: discovery happens
// when the test URL is opened.
func (p Providers) StartProviderTest(ctx context.Context, q db.DBTX, id, tokenID, tokenName string) (ProviderTest, error) {
	if _, ok := p.env(id); ok {
		return ProviderTest{}, ErrReadOnly
	}
	ip, err := p.readProvider(ctx, q, id, "")
	if err != nil {
		return ProviderTest{}, err
	}
	if ip.PendingRevision == nil {
		return ProviderTest{}, ErrNoPendingRevision
	}
	t := ProviderTest{Revision: *ip.PendingRevision, Capability: NewSecret()}
	err = q.QueryRow(ctx, `INSERT INTO signin_flows (id, purpose, provider_id, revision, capability_hash, token_id, token_name, expires_at)
		VALUES ($1, 'test', $2, $3, $4, $5, $6, now() + $7::interval) RETURNING expires_at`,
		db.NewID("sgf"), id, t.Revision, HashSecret(t.Capability), tokenID, tokenName, SignInFlowLifetime).Scan(&t.ExpiresAt)
	return t, err
}

// CheckStillPending refuses a test whose revision is no longer the provider's pending one, so
// that the person is not sent to the provider for nothing (the activation checks again, under
// the guard's lock).
func (p Providers) CheckStillPending(ctx context.Context, q db.DBTX, f SignInFlow) error {
	ip, err := p.readProvider(ctx, q, f.ProviderID, "")
	if errors.Is(err, ErrNotFound) {
		return &SignInError{Reason: "The identity provider was deleted."}
	}
	if err != nil {
		return err
	}
	if ip.PendingRevision == nil || *ip.PendingRevision != f.Revision {
		return supersededError(f.Revision)
	}
	return nil
}

func supersededError(revision int64) error {
	return &SignInError{Code: "no_pending_revision",
		Reason: fmt.Sprintf("Revision %d is no longer the provider's pending revision (a later write superseded it, or another test activated it): nothing was activated.", revision)}
}

// PeekProviderTest reads the flow of a test URL that can still be opened, without spending it.
func PeekProviderTest(ctx context.Context, q db.DBTX, capability string) (SignInFlow, error) {
	f, err := scanFlow(q.QueryRow(ctx, `SELECT `+flowColumns+` FROM signin_flows
		WHERE capability_hash = $1 AND purpose = 'test' AND opened_at IS NULL AND expires_at > now()`, HashSecret(capability)))
	if errors.Is(err, ErrNotFound) {
		return f, errTestLinkSpent
	}
	return f, err
}

var errTestLinkSpent = &SignInError{Reason: "This test link was already used, has expired, or is not one the deployment made: start another test."}

// OpenProviderTest opens a test URL, once: its flow gets the state and the browser binding of
// the sign-in it starts.
func OpenProviderTest(ctx context.Context, q db.DBTX, capability string, stateHash, browserHash []byte) (SignInFlow, error) {
	f, err := scanFlow(q.QueryRow(ctx, `UPDATE signin_flows SET opened_at = now(), state_hash = $2, browser_hash = $3
		WHERE capability_hash = $1 AND purpose = 'test' AND opened_at IS NULL AND expires_at > now()
		RETURNING `+flowColumns, HashSecret(capability), stateHash, browserHash))
	if errors.Is(err, ErrNotFound) {
		return f, errTestLinkSpent
	}
	return f, err
}

// StartSignIn records a sign-in flow with the provider's revision that serves it.
func StartSignIn(ctx context.Context, q db.DBTX, providerID string, revision int64, stateHash, browserHash []byte) error {
	_, err := q.Exec(ctx, `INSERT INTO signin_flows (id, purpose, provider_id, revision, state_hash, browser_hash, opened_at, expires_at)
		VALUES ($1, 'signin', $2, $3, $4, $5, now(), now() + $6::interval)`,
		db.NewID("sgf"), providerID, revision, stateHash, browserHash, SignInFlowLifetime)
	return err
}

// TakeSignInFlow ends the flow the callback names: the open flow whose state hashes to
// stateHash, started in the browser whose flow cookie hashes to browserHash. It is completed
// at once, before the code is exchanged, so that a callback is honoured once.
func TakeSignInFlow(ctx context.Context, q db.DBTX, stateHash, browserHash []byte) (SignInFlow, error) {
	f, err := scanFlow(q.QueryRow(ctx, `UPDATE signin_flows SET completed_at = now()
		WHERE state_hash = $1 AND browser_hash = $2 AND opened_at IS NOT NULL AND completed_at IS NULL AND expires_at > now()
		RETURNING `+flowColumns, stateHash, browserHash))
	if errors.Is(err, ErrNotFound) {
		return f, &SignInError{Reason: "This sign-in is not one this browser started, was already completed, or has expired: start again."}
	}
	return f, err
}

// SignInConfig is what a sign-in with one revision of a provider needs, secret included.
type SignInConfig struct {
	ProviderID, Slug, Issuer string
	Revision                 int64
	ProviderConfig
	ClientSecret string
}

// RevisionConfig reads a provider's revision for a sign-in or a test.
func (p Providers) RevisionConfig(ctx context.Context, q db.DBTX, id string, revision int64) (SignInConfig, error) {
	if e, ok := p.env(id); ok {
		return SignInConfig{ProviderID: e.ID(), Slug: e.Slug, Issuer: e.Issuer, Revision: 1,
			ProviderConfig: e.ProviderConfig, ClientSecret: e.ClientSecret}, nil
	}
	c := SignInConfig{ProviderID: id, Revision: revision}
	err := q.QueryRow(ctx, `SELECT p.slug, p.issuer, r.display_name, r.client_id, r.scopes, r.allowed_email_domains
		FROM identity_providers p JOIN identity_provider_revisions r ON r.provider_id = p.id
		WHERE p.id = $1 AND r.revision = $2`, id, revision).Scan(&c.Slug, &c.Issuer, &c.DisplayName, &c.ClientID, &c.Scopes, &c.AllowedEmailDomains)
	if err != nil {
		return c, db.Translate(err)
	}
	secret, _, err := p.ProviderClientSecret(ctx, q, id, revision)
	c.ClientSecret = secret
	return c, err
}

// SignInProvider is a provider that serves sign-in now, as the sign-in page lists it.
type SignInProvider struct {
	ID, Slug, DisplayName string
	Revision              int64
}

// SignInProviders lists the providers that serve sign-in (enabled, with an active revision;
// environment providers always), by slug.
func (p Providers) SignInProviders(ctx context.Context, q db.DBTX) ([]SignInProvider, error) {
	envSlugs := make([]string, 0, len(p.Env))
	for _, e := range p.Env {
		envSlugs = append(envSlugs, e.Slug)
	}
	rows, err := q.Query(ctx, `SELECT p.id, p.slug, r.display_name, p.active_revision FROM identity_providers p
		JOIN identity_provider_revisions r ON r.provider_id = p.id AND r.revision = p.active_revision
		WHERE p.state = 'enabled' AND p.slug <> ALL($1)`, envSlugs)
	if err != nil {
		return nil, err
	}
	var list []SignInProvider
	for rows.Next() {
		var sp SignInProvider
		if err := rows.Scan(&sp.ID, &sp.Slug, &sp.DisplayName, &sp.Revision); err != nil {
			rows.Close()
			return nil, err
		}
		list = append(list, sp)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, e := range p.Env {
		list = append(list, SignInProvider{ID: e.ID(), Slug: e.Slug, DisplayName: e.DisplayName, Revision: 1})
	}
	slices.SortFunc(list, func(a, b SignInProvider) int { return strings.Compare(a.Slug, b.Slug) })
	return list, nil
}

// SignInProviderBySlug is the provider that serves sign-in under slug.
func (p Providers) SignInProviderBySlug(ctx context.Context, q db.DBTX, slug string) (SignInProvider, error) {
	list, err := p.SignInProviders(ctx, q)
	if err != nil {
		return SignInProvider{}, err
	}
	for _, sp := range list {
		if sp.Slug == slug {
			return sp, nil
		}
	}
	return SignInProvider{}, &SignInError{Reason: fmt.Sprintf("No identity provider %q serves sign-in on this deployment.", slug)}
}

// StillServing refuses a sign-in whose provider no longer serves it with the flow's revision
// (disabled, deleted, or another revision activated since the flow started).
func (p Providers) StillServing(ctx context.Context, q db.DBTX, f SignInFlow) error {
	list, err := p.SignInProviders(ctx, q)
	if err != nil {
		return err
	}
	for _, sp := range list {
		if sp.ID == f.ProviderID && sp.Revision == f.Revision {
			return nil
		}
	}
	return &SignInError{Reason: "The identity provider's configuration changed, or it was disabled, while you signed in: start again."}
}

// CheckIdentity applies a revision's rules to the person the provider vouched for: a verified
// email, in one of the allowed domains when the revision names any.
func (c SignInConfig) CheckIdentity(email string, verified bool) error {
	if email == "" || !verified {
		return &SignInError{Reason: "The identity provider did not vouch for a verified email address; it is required."}
	}
	at := strings.LastIndexByte(email, '@')
	domain := strings.ToLower(email[at+1:])
	if at < 1 || (len(c.AllowedEmailDomains) > 0 && !slices.Contains(c.AllowedEmailDomains, domain)) {
		return &SignInError{Reason: fmt.Sprintf("%s is not in a domain this identity provider allows (%s).", email, strings.Join(c.AllowedEmailDomains, ", "))}
	}
	return nil
}

// ActivateTestedRevision activates the revision a successful test was bound to, if it is still
// the provider's pending one, enabling the provider if it was disabled; under the guard's lock
// and in the caller's transaction, with its audit event (audit is the event, its changed
// fields filled here). The token that started the test must still be valid.
func ActivateTestedRevision(ctx context.Context, q db.DBTX, f SignInFlow, audit AuditEvent) (IdentityProvider, error) {
	if err := lockProviders(ctx, q); err != nil {
		return IdentityProvider{}, err
	}
	if f.TokenID != nil && *f.TokenID != LocalOperatorID {
		var valid bool
		if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM operator_tokens WHERE id = $1 AND revoked_at IS NULL
			AND (expires_at IS NULL OR expires_at > now()))`, *f.TokenID).Scan(&valid); err != nil {
			return IdentityProvider{}, err
		}
		if !valid {
			return IdentityProvider{}, &SignInError{Reason: "The operator token that started this test was revoked or has expired: start another test."}
		}
	}
	var state string
	var pending *int64
	err := q.QueryRow(ctx, `SELECT state, pending_revision FROM identity_providers WHERE id = $1 FOR UPDATE`, f.ProviderID).Scan(&state, &pending)
	if errors.Is(err, pgx.ErrNoRows) {
		return IdentityProvider{}, &SignInError{Reason: "The identity provider was deleted."}
	}
	if err != nil {
		return IdentityProvider{}, err
	}
	if pending == nil || *pending != f.Revision {
		return IdentityProvider{}, supersededError(f.Revision)
	}
	if _, err := q.Exec(ctx, `UPDATE identity_providers SET active_revision = $2, pending_revision = NULL, state = 'enabled',
		version = version + 1, updated_at = now() WHERE id = $1`, f.ProviderID, f.Revision); err != nil {
		return IdentityProvider{}, err
	}
	audit.ChangedFields = []string{"active_revision", "pending_revision"}
	if state != ProviderEnabled {
		audit.ChangedFields = append(audit.ChangedFields, "state")
	}
	if err := RecordAudit(ctx, q, audit); err != nil {
		return IdentityProvider{}, err
	}
	return Providers{}.readProvider(ctx, q, f.ProviderID, "")
}

// TestAudit is the audit event of a test's callback: by the token that started the test.
func TestAudit(f SignInFlow, requestID, source, outcome string, status int, code string) AuditEvent {
	e := AuditEvent{RequestID: requestID, ActorType: ActorOperatorToken, Operation: OperationActivateProvider,
		ProviderID: &f.ProviderID, Outcome: outcome, Status: status, SourceAddress: source}
	if f.TokenID != nil {
		e.ActorID, e.TokenID = *f.TokenID, f.TokenID
	}
	if f.TokenName != nil {
		e.ActorName = *f.TokenName
	}
	if e.ActorID == LocalOperatorID {
		e.ActorType = ActorLocalOperator
	}
	if code != "" {
		e.Error = &code
	}
	return e
}

// Sign-in methods of a deployment session.
const (
	MethodOIDC          = "oidc"
	MethodLocalRecovery = "local_recovery"
)

// DeploymentSession is a person signed in with a deployment provider (method oidc) or with a
// local recovery (method local_recovery: no provider; the subject is the recovery's ID).
type DeploymentSession struct {
	ID, Method, ProviderID, Subject, Email, Name string
	CreatedAt, ExpiresAt                         time.Time
}

// DeploymentSessionLifetime is how long a sign-in lasts.
const DeploymentSessionLifetime = 8 * time.Hour

// CreateDeploymentSession stores a session; the cookie's value is returned once, its digest kept.
// A session without a method is an identity provider's (oidc).
func CreateDeploymentSession(ctx context.Context, q db.DBTX, s DeploymentSession) (DeploymentSession, string, error) {
	secret := NewSecret()
	s.ID = db.NewID("ses")
	if s.Method == "" {
		s.Method = MethodOIDC
	}
	err := q.QueryRow(ctx, `INSERT INTO deployment_sessions (id, token_hash, method, provider_id, subject, email, name, expires_at)
		VALUES ($1, $2, $3, NULLIF($4, ''), $5, $6, $7, now() + $8::interval) RETURNING created_at, expires_at`,
		s.ID, HashSecret(secret), s.Method, s.ProviderID, s.Subject, s.Email, s.Name, DeploymentSessionLifetime).Scan(&s.CreatedAt, &s.ExpiresAt)
	return s, secret, err
}

// DeploymentSessionBySecret is the live session whose cookie is secret (ErrNotFound when none:
// unknown, expired or revoked).
func DeploymentSessionBySecret(ctx context.Context, q db.DBTX, secret string) (DeploymentSession, error) {
	var s DeploymentSession
	err := q.QueryRow(ctx, `SELECT id, method, COALESCE(provider_id, ''), subject, email, name, created_at, expires_at FROM deployment_sessions
		WHERE token_hash = $1 AND revoked_at IS NULL AND expires_at > now()`, HashSecret(secret)).
		Scan(&s.ID, &s.Method, &s.ProviderID, &s.Subject, &s.Email, &s.Name, &s.CreatedAt, &s.ExpiresAt)
	return s, db.Translate(err)
}

// RevokeDeploymentSession ends a session (signing out); revoking a revoked one changes nothing.
func RevokeDeploymentSession(ctx context.Context, q db.DBTX, id string) error {
	_, err := q.Exec(ctx, `UPDATE deployment_sessions SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL`, id)
	return err
}

// PurgeEndedSignIns deletes sign-in flows and local recoveries a day after they expired and
// sessions a week after they expired (a revoked session is kept until then too, for whoever
// investigates it). It returns how many flows (recoveries included) and sessions it deleted.
func PurgeEndedSignIns(ctx context.Context, q db.DBTX) (flows, sessions int64, err error) {
	tag, err := q.Exec(ctx, `DELETE FROM signin_flows WHERE expires_at < now() - interval '1 day'`)
	if err != nil {
		return 0, 0, fmt.Errorf("purge ended sign-in flows: %w", err)
	}
	flows = tag.RowsAffected()
	tag, err = q.Exec(ctx, `DELETE FROM local_recoveries WHERE expires_at < now() - interval '1 day'`)
	if err != nil {
		return flows, 0, fmt.Errorf("purge ended local recoveries: %w", err)
	}
	flows += tag.RowsAffected()
	tag, err = q.Exec(ctx, `DELETE FROM deployment_sessions WHERE expires_at < now() - interval '7 days'`)
	if err != nil {
		return flows, 0, fmt.Errorf("purge ended sessions: %w", err)
	}
	return flows, tag.RowsAffected(), nil
}
