package problem

import (
	"errors"
	"net/http"
	"time"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
)

// sentinels maps each of the domain's sentinel errors (server/domain/errors.go) to its problem.
// It is the one place a domain error meets HTTP; typed errors, which carry values, follow in
// FromError.
var sentinels = []struct {
	err    error
	status int
	code   api.ErrorCode
	detail string
}{
	{domain.ErrNotFound, http.StatusNotFound, api.ErrorCodeNotFound, "No such resource."},
	{domain.ErrSlugTaken, http.StatusConflict, api.ErrorCodeSlugTaken, "The slug is taken: another organization, or another identity provider (stored or from the environment), has it."},
	{domain.ErrConflict, http.StatusConflict, api.ErrorCodeConflict, "The change collides with another made at the same moment; read the resource again and retry."},
	{domain.ErrInvalidState, http.StatusConflict, api.ErrorCodeInvalidState, "The organization's state does not allow this change."},
	{domain.ErrPurgeStarted, http.StatusConflict, api.ErrorCodePurgeStarted, "The organization is being purged; nothing can stop or change that."},
	{domain.ErrSuspended, http.StatusForbidden, api.ErrorCodeSuspended, "This organization is suspended or being deleted: it can be read, not changed."},
	{domain.ErrMoved, http.StatusGone, api.ErrorCodeMoved, "This organization has moved to another deployment."},
	{domain.ErrInvitationExpired, http.StatusGone, api.ErrorCodeInvitationExpired, "The invitation has expired; ask for a new one."},
	{domain.ErrInvitationRevoked, http.StatusGone, api.ErrorCodeInvitationRevoked, "The invitation was revoked; ask for a new one."},
	{domain.ErrInvitationAccepted, http.StatusGone, api.ErrorCodeInvitationAccepted, "The invitation was already accepted."},
	{domain.ErrInstallationConflict, http.StatusConflict, api.ErrorCodeInstallationConflict, "This installation ID is registered with another public key."},
	{domain.ErrCredentialGone, http.StatusUnauthorized, api.ErrorCodeUnauthenticated, "The credential was revoked or expired."},
	{domain.ErrLimitExceeded, http.StatusForbidden, api.ErrorCodeLimitExceeded, "The organization's limit is reached."},
	{domain.ErrReadOnly, http.StatusConflict, api.ErrorCodeReadOnly, "This provider comes from the deployment's environment (RENGA_IDENTITY_PROVIDERS); change it there."},
	{domain.ErrLockout, http.StatusConflict, api.ErrorCodeLockout, "This change would leave the deployment with no usable sign-in method; activate another provider first (or, on the server host, renga identity-provider recover-local)."},
	{domain.ErrProviderInUse, http.StatusConflict, api.ErrorCodeProviderInUse, "Support people sign in through this provider: the enabled support source names it. Name another provider there, or disable the support source, first."},
	{domain.ErrProviderEnabled, http.StatusConflict, api.ErrorCodeProviderEnabled, "The client secret can be cleared only while the provider is disabled."},
	{domain.ErrNoPendingRevision, http.StatusConflict, api.ErrorCodeNoPendingRevision, "The provider has no pending revision to test: every revision written is active. Write its configuration (PUT) to make one."},
	{domain.ErrNoSecretKey, http.StatusServiceUnavailable, api.ErrorCodeUnavailable, "The deployment has no RENGA_SECRET_KEY, so it cannot store a secret."},
	{domain.ErrDestinationNotEmpty, http.StatusConflict, api.ErrorCodeDestinationNotEmpty, "The destination organization is not empty (members, installations, intake keys, identity providers or an earlier import); import into a new, empty organization."},
	{domain.ErrInstallationsHere, http.StatusConflict, api.ErrorCodeArchiveInstallationsPresent, "An installation of the archive is already in this deployment (installation IDs are unique in a deployment, whatever the organization): import the archive into another deployment, or delete the organization that holds them first. Retrying changes nothing."},
	{domain.ErrTransferState, http.StatusConflict, api.ErrorCodeInvalidTransferState, "The transfer's kind or state does not allow this."},
	{domain.ErrCapabilityInvalid, http.StatusForbidden, api.ErrorCodeCapabilityInvalid, "The download capability is not valid for this token and transfer; authorize a new download."},
	{domain.ErrArchiveCorrupt, http.StatusBadRequest, api.ErrorCodeArchiveCorrupt, "The archive cannot be read: it is damaged or not an archive made by an export."},
	{domain.ErrArchiveChecksum, http.StatusBadRequest, api.ErrorCodeArchiveChecksumMismatch, "A member of the archive does not match the SHA-256 its manifest lists."},
	{domain.ErrArchiveMemberMissing, http.StatusBadRequest, api.ErrorCodeArchiveMemberMissing, "A member the archive's manifest lists is missing."},
	{domain.ErrArchiveVersion, http.StatusBadRequest, api.ErrorCodeArchiveVersionUnsupported, "The archive's format version is not one this deployment reads."},
	{domain.ErrInvalidToken, http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The token request cannot be honoured."},
}

// FromError is the problem a domain error answers, or nil for an unexpected error. Driver
// errors that escaped the store boundary are translated first, so a unique violation anywhere
// is a 409, never a 500.
func FromError(err error) *Error {
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	if db.Unavailable(err) {
		return Unavailable()
	}
	err = db.Translate(err)
	var (
		vm *domain.VersionMismatchError
		ve *domain.ValidationError
		dl *domain.DailyLimitError
		le *domain.LimitError
		ne *domain.NotEntitledError
		sl *domain.SettingLockedError
	)
	switch {
	case errors.As(err, &vm):
		pe = Newf(http.StatusPreconditionFailed, api.ErrorCodeVersionMismatch,
			"The If-Match version is not the current one (%d); read it again and reapply your change.", vm.Current)
		pe.CurrentVersion = &vm.Current
	case errors.As(err, &ve):
		pe = New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The request does not match the API description; see errors.")
		pe.Errors = []FieldError{{Field: ve.Field, Message: ve.Message}}
	case errors.As(err, &dl):
		pe = Newf(http.StatusTooManyRequests, api.ErrorCodeLimitExceeded, "The organization's %s (%d) is used up for today (UTC).", dl.Limit, dl.Value)
		pe.RetryAfter = UntilNextUTCMidnight(time.Now())
	case errors.As(err, &le):
		pe = Newf(http.StatusForbidden, api.ErrorCodeLimitExceeded, "The organization's %s limit (%d) is reached.", le.Limit, le.Value)
	case errors.As(err, &ne):
		pe = Newf(http.StatusForbidden, api.ErrorCodeNotEntitled, "The organization is not entitled to %s.", ne.Entitlement)
	case errors.Is(err, domain.ErrMoving):
		pe = New(http.StatusServiceUnavailable, api.ErrorCodeMoving,
			"This organization is being moved to another deployment: agent writes wait until the move is completed or abandoned; retry after the time in Retry-After.")
		pe.RetryAfter = MovingRetryAfter
	case errors.As(err, &sl):
		pe = Newf(http.StatusConflict, api.ErrorCodeSettingLocked, "%s is locked by the deployment's policy for this organization.", sl.Field)
		pe.Errors = []FieldError{{Field: sl.Field, Message: "locked"}}
	default:
		for _, s := range sentinels {
			if errors.Is(err, s.err) {
				return New(s.status, s.code, s.detail)
			}
		}
		return nil
	}
	return pe
}

// MovingRetryAfter is the Retry-After of 503 moving: a move takes minutes, an agent's retries
// back off further on their own.
const MovingRetryAfter = 5

// UnavailableRetryAfter is the Retry-After of a 503: a database restart takes a few seconds.
const UnavailableRetryAfter = 2

// Unavailable is what an infrastructure failure (the database unreachable, a statement past
// its deadline) becomes: 503, never an authentication or client error.
func Unavailable() *Error {
	pe := New(http.StatusServiceUnavailable, api.ErrorCodeUnavailable,
		"The deployment cannot reach its database right now; retry after the time in Retry-After.")
	pe.RetryAfter = UnavailableRetryAfter
	return pe
}

// UntilNextUTCMidnight is the Retry-After of a daily limit.
func UntilNextUTCMidnight(now time.Time) int {
	now = now.UTC()
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	return max(1, int((next.Sub(now)+time.Second-1)/time.Second)) // rounded up: never early
}
