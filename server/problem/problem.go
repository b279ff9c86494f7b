// Package problem renders RFC 9457 problem bodies with Renga's stable `error` codes.
package problem

import (
	"encoding/json"
	"fmt"
	"net/http"

	"renga.dev/renga/gen/api"
)

// FieldError names one invalid field.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is a problem the caller can act on. Handlers return it; one writer renders it.
type Error struct {
	Status         int
	Code           api.ErrorCode
	Title          string
	Detail         string
	Errors         []FieldError
	RequiredScope  string
	CurrentVersion *int64
	RetryAfter     int
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Detail) }

// New makes a problem; the title comes from the code.
func New(status int, code api.ErrorCode, detail string) *Error {
	return &Error{Status: status, Code: code, Detail: detail}
}

// Newf is New with formatting.
func Newf(status int, code api.ErrorCode, format string, args ...any) *Error {
	return New(status, code, fmt.Sprintf(format, args...))
}

var titles = map[api.ErrorCode]string{
	api.ErrorCodeInvalidRequest:              "Invalid request",
	api.ErrorCodeInvalidPageToken:            "Invalid page token",
	api.ErrorCodeIdempotencyKeyRequired:      "Idempotency-Key required",
	api.ErrorCodeIdempotencyKeyReused:        "Idempotency-Key reused",
	api.ErrorCodeUnauthenticated:             "Unauthenticated",
	api.ErrorCodeInsufficientScope:           "Insufficient scope",
	api.ErrorCodeHttpsRequired:               "HTTPS required",
	api.ErrorCodeNotFound:                    "Not found",
	api.ErrorCodeMethodNotAllowed:            "Method not allowed",
	api.ErrorCodePayloadTooLarge:             "Payload too large",
	api.ErrorCodeUnsupportedMediaType:        "Unsupported media type",
	api.ErrorCodePreconditionRequired:        "Precondition required",
	api.ErrorCodeVersionMismatch:             "Version mismatch",
	api.ErrorCodeSlugTaken:                   "Slug taken",
	api.ErrorCodeConflict:                    "Conflict",
	api.ErrorCodeInvalidState:                "Invalid state",
	api.ErrorCodeInvitationExpired:           "Invitation expired",
	api.ErrorCodeInvitationRevoked:           "Invitation revoked",
	api.ErrorCodeInvitationAccepted:          "Invitation accepted",
	api.ErrorCodeNotEntitled:                 "Not entitled",
	api.ErrorCodeInstallationConflict:        "Installation conflict",
	api.ErrorCodeRateLimited:                 "Rate limited",
	api.ErrorCodeSuspended:                   "Suspended",
	api.ErrorCodeMoved:                       "Moved",
	api.ErrorCodeLimitExceeded:               "Limit exceeded",
	api.ErrorCodeSettingLocked:               "Setting locked",
	api.ErrorCodePurgeStarted:                "Purge started",
	api.ErrorCodeProviderEnabled:             "Provider enabled",
	api.ErrorCodeProviderInUse:               "Provider in use",
	api.ErrorCodeReadOnly:                    "Read only",
	api.ErrorCodeLockout:                     "Lockout",
	api.ErrorCodeNoPendingRevision:           "No pending revision",
	api.ErrorCodeUnavailable:                 "Unavailable",
	api.ErrorCodeInternal:                    "Internal error",
	api.ErrorCodeDestinationNotEmpty:         "Destination not empty",
	api.ErrorCodeInvalidTransferState:        "Invalid transfer state",
	api.ErrorCodeCapabilityInvalid:           "Capability invalid",
	api.ErrorCodeArchiveCorrupt:              "Archive corrupt",
	api.ErrorCodeArchiveChecksumMismatch:     "Archive checksum mismatch",
	api.ErrorCodeArchiveMemberMissing:        "Archive member missing",
	api.ErrorCodeArchiveVersionUnsupported:   "Archive version unsupported",
	api.ErrorCodeArchiveInstallationsPresent: "Installations already in this deployment",
	api.ErrorCodeMoving:                      "Organization moving",
}

// Body is the JSON shape of a problem.
type Body struct {
	Type           string        `json:"type"`
	Title          string        `json:"title"`
	Status         int           `json:"status"`
	Detail         string        `json:"detail,omitempty"`
	Error          api.ErrorCode `json:"error"`
	RequestID      string        `json:"request_id,omitempty"`
	Errors         []FieldError  `json:"errors,omitempty"`
	RequiredScope  string        `json:"required_scope,omitempty"`
	CurrentVersion *int64        `json:"current_version,omitempty"`
}

// Internal is what an unexpected error becomes: nothing of its cause reaches the caller.
func Internal() *Error {
	return New(http.StatusInternalServerError, api.ErrorCodeInternal,
		"The server could not complete the request; quote the request ID when reporting it.")
}

// Write renders p with the request's ID.
func Write(w http.ResponseWriter, requestID string, p *Error) {
	title := p.Title
	if title == "" {
		title = titles[p.Code]
	}
	body := Body{
		Type:           "https://renga.dev/problems/" + string(p.Code),
		Title:          title,
		Status:         p.Status,
		Detail:         p.Detail,
		Error:          p.Code,
		RequestID:      requestID,
		Errors:         p.Errors,
		RequiredScope:  p.RequiredScope,
		CurrentVersion: p.CurrentVersion,
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.RetryAfter > 0 {
		h.Set("Retry-After", fmt.Sprint(p.RetryAfter))
	}
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(body)
}
