package domain

import (
	"errors"
	"fmt"

	"renga.dev/renga/server/db"
)

// The domain's errors: every error a domain function returns on purpose is declared here, and
// server/problem maps each to its HTTP status and stable `error` code in one table. Anything
// else a domain function returns is unexpected (a 500, or a 503 for the database).
var (
	// ErrNotFound: no such resource (db.Translate turns pgx.ErrNoRows into it).
	ErrNotFound = db.ErrNotFound
	// ErrConflict: a unique constraint refused a row that no more specific error names.
	ErrConflict = db.ErrConflict

	// ErrSlugTaken: another resource of the kind has the slug (an organization, or an identity
	// provider stored or from the environment).
	ErrSlugTaken = errors.New("slug taken")
	// ErrInvalidState: the organization's state does not allow the change.
	ErrInvalidState = errors.New("invalid state")
	// ErrPurgeStarted: the organization is being purged; nothing can stop or change that.
	ErrPurgeStarted = errors.New("purge started")
	// ErrSuspended: the organization is suspended or being deleted; its members can read, not
	// write, and its agents are refused.
	ErrSuspended = errors.New("organization suspended")
	// ErrMoved: the organization moved to another deployment (RFD 23: 410 moved).
	ErrMoved = errors.New("organization moved")
	// ErrMoving: an export for a move froze the organization's agent writes until the move is
	// completed or the export cancelled or failed (503 moving, with Retry-After: the agent
	// keeps what it sends in its queue and retries).
	ErrMoving = errors.New("organization moving")

	// ErrInvitationExpired, ErrInvitationRevoked, ErrInvitationAccepted: an invitation that can
	// no longer be accepted.
	ErrInvitationExpired  = errors.New("invitation expired")
	ErrInvitationRevoked  = errors.New("invitation revoked")
	ErrInvitationAccepted = errors.New("invitation already accepted")

	// ErrLimitExceeded is what LimitError and DailyLimitError unwrap to.
	ErrLimitExceeded = errors.New("limit exceeded")

	// ErrInstallationConflict: a known installation ID registered again with another key.
	ErrInstallationConflict = errors.New("installation registered with another public key")

	// ErrCredentialGone: the caller's credential was revoked or expired while its write was in
	// flight (the write re-checks it in its transaction).
	ErrCredentialGone = errors.New("credential revoked or expired during the request")

	// ErrReadOnly: an environment provider, which only the environment changes.
	ErrReadOnly = errors.New("read only")
	// ErrLockout: the change would leave the deployment with no usable sign-in method.
	ErrLockout = errors.New("lockout")
	// ErrProviderInUse: the enabled support source names the provider: support people sign in
	// through it.
	ErrProviderInUse = errors.New("provider in use")
	// ErrProviderEnabled: the change needs the provider disabled first.
	ErrProviderEnabled = errors.New("provider enabled")
	// ErrNoPendingRevision: a test needs a pending revision, and the provider has none (every
	// revision written was activated).
	ErrNoPendingRevision = errors.New("no pending revision")
	// ErrNoSecretKey: the deployment has no RENGA_SECRET_KEY, so it cannot keep a secret.
	ErrNoSecretKey = errors.New("no secret key configured")
	// ErrDestinationNotEmpty: an import's destination already holds members, installations,
	// intake keys, identity providers or an earlier import (or another import won the race for it).
	ErrDestinationNotEmpty = errors.New("destination organization not empty")
	// ErrInstallationsHere: an archive's installation is already in this deployment (in any
	// organization): installation IDs are unique in a deployment, so the archive belongs in
	// another one.
	ErrInstallationsHere = errors.New("the archive's installations are in this deployment")
	// ErrTransferState: the transfer's kind or state does not allow the action.
	ErrTransferState = errors.New("invalid transfer state")
	// ErrCapabilityInvalid: a download capability that is missing, unknown, used, expired, of
	// another token, or of a cancelled transfer (one error, no hint which).
	ErrCapabilityInvalid = errors.New("download capability invalid")
	// ErrArchiveCorrupt: the archive cannot be read (not a gzip-compressed tar, a damaged
	// stream, a malformed or unexpected member, counts that do not match the manifest).
	ErrArchiveCorrupt = errors.New("archive corrupt")
	// ErrArchiveChecksum: a member's SHA-256 differs from the manifest's.
	ErrArchiveChecksum = errors.New("archive checksum mismatch")
	// ErrArchiveMemberMissing: a member the manifest lists is not in the archive.
	ErrArchiveMemberMissing = errors.New("archive member missing")
	// ErrArchiveVersion: the manifest's format version is not one this server reads.
	ErrArchiveVersion = errors.New("archive format version unsupported")

	// ErrInvalidToken: a token request (release command) that cannot be honoured.
	ErrInvalidToken = errors.New("invalid token request")
)

// VersionMismatchError is a stale or unusable If-Match; Current is the stored version.
type VersionMismatchError struct{ Current int64 }

func (e *VersionMismatchError) Error() string { return "version mismatch" }

// ValidationError is a value the domain refuses (beyond what the spec's schemas check).
type ValidationError struct{ Field, Message string }

func (e *ValidationError) Error() string { return e.Field + " " + e.Message }

// LimitError names the policy limit that blocked an action.
type LimitError struct {
	Limit string
	Value int64
}

func (e *LimitError) Error() string { return fmt.Sprintf("%s (%d) reached", e.Limit, e.Value) }
func (e *LimitError) Unwrap() error { return ErrLimitExceeded }

// DailyLimitError is a daily quota reached: retry after the next UTC midnight.
type DailyLimitError struct {
	Limit string
	Value int64
}

func (e *DailyLimitError) Error() string { return e.Limit + " reached for today" }
func (e *DailyLimitError) Unwrap() error { return ErrLimitExceeded }

// NotEntitledError names the entitlement a feature needs.
type NotEntitledError struct{ Entitlement string }

func (e *NotEntitledError) Error() string { return "not entitled to " + e.Entitlement }

// SettingLockedError names a setting the policy locks to another value.
type SettingLockedError struct{ Field string }

func (e *SettingLockedError) Error() string { return e.Field + " is locked" }

// OrganizationWritable is nil when an organization in state takes its members' writes and its
// agents' requests, else ErrMoved or ErrSuspended.
func OrganizationWritable(state string) error {
	switch state {
	case StateActive:
		return nil
	case StateMoved:
		return ErrMoved
	default:
		return ErrSuspended
	}
}

// SignInError is why a sign-in or a provider test failed: the sign-in pages show Reason to the
// person (it names no secret). It is no error of the API.
type SignInError struct {
	Reason string
	// Code is the error code its audit event carries ("" for unauthenticated: the person was
	// not signed in).
	Code string
}

func (e *SignInError) Error() string { return "sign-in refused: " + e.Reason }
