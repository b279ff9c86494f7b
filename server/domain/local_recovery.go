package domain

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/mail"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
)

// Local recovery sign-in (RFD 15's escape hatch, DESIGN §6). When the deployment's identity
// providers cannot sign anyone in (the provider is down, its client secret expired, it was
// misconfigured), `renga identity-provider recover-local` on the server host lets one support
// person sign in once without a provider. It is a release command only: no API operation and
// no HTTP route creates a recovery, so no bearer token can reach it. The code is shown once
// and stored as SHA-256; it works once, for its email, before it expires (at most 24 hours).
// Signing in with it still needs the support source to name the email: the recovery bypasses
// the identity provider, never the support source (a deployment session is only ever a support
// person's, and the support console lets in only those the support source names).

// Bounds of a recovery's lifetime.
const (
	DefaultLocalRecoveryLifetime = 15 * time.Minute
	MaxLocalRecoveryLifetime     = 24 * time.Hour
)

// Audit operations of local recovery: the release command that makes one, and a sign-in with
// one (succeeded or refused). Neither is an API operation.
const (
	OperationRecoverLocal        = "recoverLocal"
	OperationSignInLocalRecovery = "signInLocalRecovery"
)

// LocalRecoveryCodePrefix starts every recovery code, so that one is recognisable wherever it
// is pasted.
const LocalRecoveryCodePrefix = "renga_recovery_"

// LocalRecovery is a recovery as the release command shows it (never its code).
type LocalRecovery struct {
	ID        string    `json:"id"`
	Email     string    `json:"email"`
	ExpiresAt time.Time `json:"expires_at"`
}

// ErrRecoveryRefused is the one refusal of a recovery sign-in whose email and code do not
// match a recovery that can still be used: wrong code, wrong email, expired, used or revoked,
// with no hint which.
var ErrRecoveryRefused = &SignInError{Reason: "This email and code do not match a local recovery sign-in that can still be used. " +
	"Ask the operator for a new one."}

// CheckRecoveryEmail accepts a bare email address and returns it lowercased.
func CheckRecoveryEmail(email string) (string, error) {
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || a.Name != "" || len(email) > 254 || !strings.Contains(email, "@") {
		return "", &ValidationError{Field: "email", Message: "must be a bare email address"}
	}
	return strings.ToLower(email), nil
}

// RecoverLocal makes a local recovery sign-in for email, usable once within lifetime, by the
// release command run invocationID; it returns the recovery and its code (shown once, stored as
// its digest). Under the providers' guard lock, and with its audit event (recoverLocal, by the
// local operator, for email as its target, without the code) in the caller's transaction. The support source must name
// email now (a recovery for someone it does not name could sign nobody in). A newer recovery
// for the same email revokes the older ones still open.
func RecoverLocal(ctx context.Context, q db.DBTX, email string, lifetime time.Duration, invocationID string) (LocalRecovery, string, error) {
	if err := lockProviders(ctx, q); err != nil {
		return LocalRecovery{}, "", err
	}
	email, err := CheckRecoveryEmail(email)
	if err != nil {
		return LocalRecovery{}, "", err
	}
	if lifetime <= 0 || lifetime > MaxLocalRecoveryLifetime {
		return LocalRecovery{}, "", &ValidationError{Field: "expires_in", Message: "must be more than 0 and at most 24h"}
	}
	src, err := GetSupportSource(ctx, q)
	if err != nil {
		return LocalRecovery{}, "", err
	}
	if !src.NamesEmail(email) {
		return LocalRecovery{}, "", ErrNotSupportPerson
	}
	if _, err := q.Exec(ctx, `UPDATE local_recoveries SET revoked_at = now()
		WHERE email = $1 AND used_at IS NULL AND revoked_at IS NULL`, email); err != nil {
		return LocalRecovery{}, "", err
	}
	code := LocalRecoveryCodePrefix + NewSecret()
	r := LocalRecovery{ID: db.NewID("rcv"), Email: email}
	if err := q.QueryRow(ctx, `INSERT INTO local_recoveries (id, email, code_hash, invocation_id, expires_at)
		VALUES ($1, $2, $3, $4, now() + $5::interval) RETURNING expires_at`,
		r.ID, email, HashSecret(code), invocationID, lifetime).Scan(&r.ExpiresAt); err != nil {
		return LocalRecovery{}, "", err
	}
	audit := ReleaseAudit(invocationID, OperationRecoverLocal, "", OutcomeSucceeded, []string{"local_recovery"})
	audit.TargetEmail = &email
	if err := RecordAudit(ctx, q, audit); err != nil {
		return LocalRecovery{}, "", err
	}
	return r, code, nil
}

// ErrNotSupportPerson: a local recovery for an email the support source does not name.
var ErrNotSupportPerson = errors.New("the support source does not name this email")

// SignInWithLocalRecovery spends the recovery whose code is code, for email, and starts a
// session (method local_recovery) for its person; in the caller's transaction, with the
// sign-in's audit event (signInLocalRecovery, the session as its actor). Of two uses of one
// code at once, one wins: the other waits for its row and then finds it used. Any mismatch is
// ErrRecoveryRefused. A person the support source no longer names is refused too, and the
// recovery stays unused (the caller rolls back).
func SignInWithLocalRecovery(ctx context.Context, q db.DBTX, email, code, requestID, source string) (DeploymentSession, string, error) {
	email, err := CheckRecoveryEmail(email)
	if err != nil || !strings.HasPrefix(code, LocalRecoveryCodePrefix) {
		return DeploymentSession{}, "", ErrRecoveryRefused
	}
	var id string
	err = q.QueryRow(ctx, `UPDATE local_recoveries SET used_at = now(), session_id = 'pending'
		WHERE code_hash = $1 AND email = $2 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > now()
		RETURNING id`, HashSecret(code), email).Scan(&id)
	if errors.Is(db.Translate(err), ErrNotFound) {
		return DeploymentSession{}, "", ErrRecoveryRefused
	}
	if err != nil {
		return DeploymentSession{}, "", err
	}
	src, err := GetSupportSource(ctx, q)
	if err != nil {
		return DeploymentSession{}, "", err
	}
	if !src.NamesEmail(email) {
		return DeploymentSession{}, "", &SignInError{Reason: fmt.Sprintf("Deployment sign-in is for the deployment's support people only, "+
			"and its support source does not name %s (a local recovery bypasses the identity provider, not the support source).", email)}
	}
	sess, secret, err := CreateDeploymentSession(ctx, q, DeploymentSession{Method: MethodLocalRecovery, Subject: id, Email: email})
	if err != nil {
		return DeploymentSession{}, "", err
	}
	if _, err := q.Exec(ctx, `UPDATE local_recoveries SET session_id = $2 WHERE id = $1`, id, sess.ID); err != nil {
		return DeploymentSession{}, "", err
	}
	if err := RecordAudit(ctx, q, LocalRecoverySignInAudit(sess.ID, email, requestID, source, OutcomeSucceeded, http.StatusSeeOther, "")); err != nil {
		return DeploymentSession{}, "", err
	}
	return sess, secret, nil
}

// LocalRecoverySignInAudit is the audit event of a sign-in with a local recovery: by the
// session it made (its ID, the person's email), or, refused, by anonymous with the email
// given when it is one (never the code).
func LocalRecoverySignInAudit(sessionID, email, requestID, source, outcome string, status int, code string) AuditEvent {
	e := AuditEvent{RequestID: requestID, ActorType: ActorSupportPerson, ActorID: sessionID, Operation: OperationSignInLocalRecovery,
		Outcome: outcome, Status: status, SourceAddress: source, ChangedFields: []string{}}
	if e.ActorID == "" {
		e.ActorID = "anonymous"
	}
	if clean, err := CheckRecoveryEmail(email); err == nil {
		e.ActorName = clean
	}
	if outcome == OutcomeSucceeded {
		e.ChangedFields = []string{"session"}
	}
	if code != "" {
		e.Error = &code
	}
	return e
}

// openLocalRecoveries counts the recoveries that can still sign someone in: unused, not
// revoked, not expired, for an email the support source names now (one it stopped naming can
// sign nobody in). The lockout guard counts them as a usable sign-in method.
func openLocalRecoveries(ctx context.Context, q db.DBTX) (int, error) {
	rows, err := q.Query(ctx, `SELECT email FROM local_recoveries
		WHERE used_at IS NULL AND revoked_at IS NULL AND expires_at > now()`)
	if err != nil {
		return 0, err
	}
	emails, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(emails) == 0 {
		return 0, err
	}
	src, err := GetSupportSource(ctx, q)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range emails {
		if src.NamesEmail(e) {
			n++
		}
	}
	return n, nil
}
