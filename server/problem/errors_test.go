package problem

import (
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
)

// TestFromErrorSentinels lists every sentinel of server/domain/errors.go.
func TestFromErrorSentinels(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int // 0: not an error of the API (FromError answers nil)
		code   api.ErrorCode
	}{
		{"ErrNotFound", domain.ErrNotFound, http.StatusNotFound, api.ErrorCodeNotFound},
		{"ErrConflict", domain.ErrConflict, http.StatusConflict, api.ErrorCodeConflict},
		{"ErrSlugTaken", domain.ErrSlugTaken, http.StatusConflict, api.ErrorCodeSlugTaken},
		{"ErrInvalidState", domain.ErrInvalidState, http.StatusConflict, api.ErrorCodeInvalidState},
		{"ErrPurgeStarted", domain.ErrPurgeStarted, http.StatusConflict, api.ErrorCodePurgeStarted},
		{"ErrSuspended", domain.ErrSuspended, http.StatusForbidden, api.ErrorCodeSuspended},
		{"ErrMoved", domain.ErrMoved, http.StatusGone, api.ErrorCodeMoved},
		{"ErrInvitationExpired", domain.ErrInvitationExpired, http.StatusGone, api.ErrorCodeInvitationExpired},
		{"ErrInvitationRevoked", domain.ErrInvitationRevoked, http.StatusGone, api.ErrorCodeInvitationRevoked},
		{"ErrInvitationAccepted", domain.ErrInvitationAccepted, http.StatusGone, api.ErrorCodeInvitationAccepted},
		{"ErrInstallationConflict", domain.ErrInstallationConflict, http.StatusConflict, api.ErrorCodeInstallationConflict},
		{"ErrCredentialGone", domain.ErrCredentialGone, http.StatusUnauthorized, api.ErrorCodeUnauthenticated},
		{"ErrDestinationNotEmpty", domain.ErrDestinationNotEmpty, http.StatusConflict, api.ErrorCodeDestinationNotEmpty},
		{"ErrTransferState", domain.ErrTransferState, http.StatusConflict, api.ErrorCodeInvalidTransferState},
		{"ErrCapabilityInvalid", domain.ErrCapabilityInvalid, http.StatusForbidden, api.ErrorCodeCapabilityInvalid},
		{"ErrArchiveCorrupt", domain.ErrArchiveCorrupt, http.StatusBadRequest, api.ErrorCodeArchiveCorrupt},
		{"ErrArchiveChecksum", domain.ErrArchiveChecksum, http.StatusBadRequest, api.ErrorCodeArchiveChecksumMismatch},
		{"ErrArchiveMemberMissing", domain.ErrArchiveMemberMissing, http.StatusBadRequest, api.ErrorCodeArchiveMemberMissing},
		{"ErrArchiveVersion", domain.ErrArchiveVersion, http.StatusBadRequest, api.ErrorCodeArchiveVersionUnsupported},
		{"ErrInstallationsHere", domain.ErrInstallationsHere, http.StatusConflict, api.ErrorCodeArchiveInstallationsPresent},
		// Returned bare by no API path today (LimitError and DailyLimitError unwrap to it), mapped
		// all the same: every domain error has its problem.
		{"ErrLimitExceeded", domain.ErrLimitExceeded, http.StatusForbidden, api.ErrorCodeLimitExceeded},
		// Release commands' (operator-token create), mapped all the same.
		{"ErrInvalidToken", domain.ErrInvalidToken, http.StatusBadRequest, api.ErrorCodeInvalidRequest},
		{"ErrReadOnly", domain.ErrReadOnly, http.StatusConflict, api.ErrorCodeReadOnly},
		{"ErrLockout", domain.ErrLockout, http.StatusConflict, api.ErrorCodeLockout},
		{"ErrProviderEnabled", domain.ErrProviderEnabled, http.StatusConflict, api.ErrorCodeProviderEnabled},
		{"ErrProviderInUse", domain.ErrProviderInUse, http.StatusConflict, api.ErrorCodeProviderInUse},
		{"ErrNoPendingRevision", domain.ErrNoPendingRevision, http.StatusConflict, api.ErrorCodeNoPendingRevision},
		{"ErrNoSecretKey", domain.ErrNoSecretKey, http.StatusServiceUnavailable, api.ErrorCodeUnavailable},
	}
	for _, tt := range tests {
		for _, wrapped := range []bool{false, true} {
			name, err := tt.name, tt.err
			if wrapped {
				name, err = name+" wrapped", fmt.Errorf("doing x: %w", fmt.Errorf("doing y: %w", tt.err))
			}
			t.Run(name, func(t *testing.T) {
				pe := FromError(err)
				if tt.status == 0 {
					if pe != nil {
						t.Fatalf("FromError = %v, want nil", pe)
					}
					return
				}
				if pe == nil {
					t.Fatalf("FromError = nil, want %d %s", tt.status, tt.code)
				}
				if pe.Status != tt.status || pe.Code != tt.code {
					t.Errorf("FromError = %d %s, want %d %s", pe.Status, pe.Code, tt.status, tt.code)
				}
				if pe.Detail == "" || strings.Contains(pe.Detail, "doing") {
					t.Errorf("detail = %q: want the table's, nothing of the error's text", pe.Detail)
				}
				if pe.Errors != nil || pe.CurrentVersion != nil || pe.RetryAfter != 0 || pe.RequiredScope != "" {
					t.Errorf("problem carries more than status, code and detail: %+v", pe)
				}
				if titles[pe.Code] == "" {
					t.Errorf("code %s has no title", pe.Code)
				}
			})
		}
	}
	t.Run("each sentinel its own problem", func(t *testing.T) {
		seen := map[api.ErrorCode]error{}
		for _, s := range sentinels {
			if prev, ok := seen[s.code]; ok {
				t.Errorf("%v and %v share the code %s", prev, s.err, s.code)
			}
			seen[s.code] = s.err
		}
		if len(sentinels) != len(tests) {
			t.Errorf("the table maps %d sentinels; this test lists %d that it should map", len(sentinels), len(tests))
		}
	})
}

func TestFromErrorTyped(t *testing.T) {
	seven := int64(7)
	tests := []struct {
		name   string
		err    error
		status int
		code   api.ErrorCode
		detail string
		errs   []FieldError
		cur    *int64
	}{
		{name: "version mismatch", err: &domain.VersionMismatchError{Current: 7}, status: http.StatusPreconditionFailed,
			code: api.ErrorCodeVersionMismatch, cur: &seven,
			detail: "The If-Match version is not the current one (7); read it again and reapply your change."},
		{name: "version mismatch wrapped", err: fmt.Errorf("update: %w", &domain.VersionMismatchError{Current: 7}),
			status: http.StatusPreconditionFailed, code: api.ErrorCodeVersionMismatch, cur: &seven,
			detail: "The If-Match version is not the current one (7); read it again and reapply your change."},
		{name: "validation", err: &domain.ValidationError{Field: "slug", Message: "is reserved"}, status: http.StatusBadRequest,
			code: api.ErrorCodeInvalidRequest, errs: []FieldError{{Field: "slug", Message: "is reserved"}},
			detail: "The request does not match the API description; see errors."},
		{name: "limit", err: &domain.LimitError{Limit: "max_agents", Value: 5}, status: http.StatusForbidden,
			code: api.ErrorCodeLimitExceeded, detail: "The organization's max_agents limit (5) is reached."},
		{name: "not entitled", err: &domain.NotEntitledError{Entitlement: "sso"}, status: http.StatusForbidden,
			code: api.ErrorCodeNotEntitled, detail: "The organization is not entitled to sso."},
		{name: "setting locked", err: &domain.SettingLockedError{Field: "retention_days"}, status: http.StatusConflict,
			code: api.ErrorCodeSettingLocked, errs: []FieldError{{Field: "retention_days", Message: "locked"}},
			detail: "retention_days is locked by the deployment's policy for this organization."},
		{name: "setting locked wrapped", err: fmt.Errorf("settings: %w", &domain.SettingLockedError{Field: "retention_days"}),
			status: http.StatusConflict, code: api.ErrorCodeSettingLocked, errs: []FieldError{{Field: "retention_days", Message: "locked"}},
			detail: "retention_days is locked by the deployment's policy for this organization."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe := FromError(tt.err)
			if pe == nil {
				t.Fatal("FromError = nil")
			}
			if pe.Status != tt.status || pe.Code != tt.code || pe.Detail != tt.detail {
				t.Errorf("FromError = %d %s %q, want %d %s %q", pe.Status, pe.Code, pe.Detail, tt.status, tt.code, tt.detail)
			}
			if !reflect.DeepEqual(pe.Errors, tt.errs) {
				t.Errorf("errors = %+v, want %+v", pe.Errors, tt.errs)
			}
			if (pe.CurrentVersion == nil) != (tt.cur == nil) || (tt.cur != nil && *pe.CurrentVersion != *tt.cur) {
				t.Errorf("current version = %v, want %v", pe.CurrentVersion, tt.cur)
			}
			if pe.RetryAfter != 0 {
				t.Errorf("Retry-After = %d, want none", pe.RetryAfter)
			}
		})
	}
	t.Run("daily limit", func(t *testing.T) {
		pe := FromError(fmt.Errorf("intake: %w", &domain.DailyLimitError{Limit: "max_intake_bytes_per_day", Value: 1000}))
		if pe == nil {
			t.Fatal("FromError = nil")
		}
		if pe.Status != http.StatusTooManyRequests || pe.Code != api.ErrorCodeLimitExceeded {
			t.Errorf("FromError = %d %s, want 429 limit_exceeded", pe.Status, pe.Code)
		}
		if want := "The organization's max_intake_bytes_per_day (1000) is used up for today (UTC)."; pe.Detail != want {
			t.Errorf("detail = %q, want %q", pe.Detail, want)
		}
		if pe.RetryAfter <= 0 || pe.RetryAfter > 86400 {
			t.Errorf("Retry-After = %d, want 1 to 86400", pe.RetryAfter)
		}
		if want := UntilNextUTCMidnight(time.Now()); pe.RetryAfter < want-2 || pe.RetryAfter > want {
			t.Errorf("Retry-After = %d, want about %d", pe.RetryAfter, want)
		}
	})
	t.Run("moving", func(t *testing.T) {
		pe := FromError(fmt.Errorf("intake: %w", domain.ErrMoving))
		if pe == nil {
			t.Fatal("FromError = nil")
		}
		if pe.Status != http.StatusServiceUnavailable || pe.Code != api.ErrorCodeMoving || pe.RetryAfter != MovingRetryAfter {
			t.Errorf("FromError = %d %s Retry-After %d, want 503 moving Retry-After %d", pe.Status, pe.Code, pe.RetryAfter, MovingRetryAfter)
		}
		if strings.Contains(pe.Detail, "intake") {
			t.Errorf("detail = %q carries the error's text", pe.Detail)
		}
	})
	t.Run("a limit error is not the daily one", func(t *testing.T) {
		// Both unwrap to ErrLimitExceeded; each keeps its own status.
		if pe := FromError(&domain.LimitError{Limit: "max_agents", Value: 1}); pe == nil || pe.Status != http.StatusForbidden {
			t.Errorf("LimitError = %v, want 403", pe)
		}
	})
}

func TestFromErrorDriver(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		status int // 0: nil
		code   api.ErrorCode
	}{
		{"unique violation", &pgconn.PgError{Code: "23505", ConstraintName: "organizations_slug_key"}, http.StatusConflict, api.ErrorCodeConflict},
		{"unique violation wrapped", fmt.Errorf("insert: %w", &pgconn.PgError{Code: "23505"}), http.StatusConflict, api.ErrorCodeConflict},
		{"foreign key violation", &pgconn.PgError{Code: "23503"}, 0, ""},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, 0, ""},
		{"no rows", pgx.ErrNoRows, http.StatusNotFound, api.ErrorCodeNotFound},
		{"no rows wrapped", fmt.Errorf("get: %w", pgx.ErrNoRows), http.StatusNotFound, api.ErrorCodeNotFound},
		{"db.ErrConflict with its constraint", db.Translate(&pgconn.PgError{Code: "23505", ConstraintName: "c"}), http.StatusConflict, api.ErrorCodeConflict},
		{"unknown", errors.New("connection reset"), 0, ""},
		{"nil", nil, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pe := FromError(tt.err)
			if tt.status == 0 {
				if pe != nil {
					t.Fatalf("FromError = %v, want nil", pe)
				}
				return
			}
			if pe == nil || pe.Status != tt.status || pe.Code != tt.code {
				t.Fatalf("FromError = %v, want %d %s", pe, tt.status, tt.code)
			}
			if strings.Contains(pe.Detail, "organizations_slug_key") {
				t.Errorf("detail %q names the constraint", pe.Detail)
			}
		})
	}
}

func TestFromErrorPassesProblemsThrough(t *testing.T) {
	p := New(http.StatusTeapot, api.ErrorCodeInternal, "mine")
	if got := FromError(p); got != p {
		t.Errorf("FromError(problem) = %p, want the same %p", got, p)
	}
	if got := FromError(fmt.Errorf("wrapped: %w", p)); got != p {
		t.Errorf("FromError(wrapped problem) = %p, want the same %p", got, p)
	}
	// A problem wins over a domain error in the same chain.
	if got := FromError(errors.Join(domain.ErrNotFound, p)); got != p {
		t.Errorf("FromError(joined) = %v, want %v", got, p)
	}
}

// Every code of the ErrorCode enum in openapi.yaml has a title, and the titles name no other
// code.
func TestTitlesCoverTheErrorCodeEnum(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	ref := spec.Components.Schemas["ErrorCode"]
	if ref == nil || ref.Value == nil || len(ref.Value.Enum) == 0 {
		t.Fatal("no ErrorCode enum in the spec")
	}
	var enum []string
	for _, v := range ref.Value.Enum {
		s, ok := v.(string)
		if !ok {
			t.Fatalf("enum value %v is not a string", v)
		}
		enum = append(enum, s)
		if titles[api.ErrorCode(s)] == "" {
			t.Errorf("code %q has no title", s)
		}
	}
	for code := range titles {
		if !slices.Contains(enum, string(code)) {
			t.Errorf("title for %q, which the enum does not have", code)
		}
	}
	if len(titles) != len(enum) {
		t.Errorf("%d titles for %d codes", len(titles), len(enum))
	}
}

func TestUntilNextUTCMidnight(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	tests := []struct {
		now  string
		want int
	}{
		{"2026-03-14T00:00:00Z", 86400},
		{"2026-03-14T00:00:00.5Z", 86400},
		{"2026-03-14T00:00:01Z", 86399},
		{"2026-03-14T12:00:00Z", 43200},
		{"2026-03-14T23:00:00Z", 3600},
		{"2026-03-14T23:59:59Z", 1},
		{"2026-03-14T23:59:59.5Z", 1},
		{"2026-03-14T23:59:59.999999999Z", 1},
		{"2026-03-14T23:59:58.5Z", 2},
		// The next UTC midnight, whatever the zone of now.
		{"2026-03-15T01:00:00+02:00", 3600},
		{"2026-03-14T18:00:00-05:00", 3600},
		{"2026-03-14T20:00:00-05:00", 82800}, // already the 15th in UTC
		// Month, year and leap-day ends.
		{"2026-03-31T23:00:00Z", 3600},
		{"2026-12-31T23:30:00Z", 1800},
		{"2028-02-28T23:00:00Z", 3600},
		{"2028-02-29T00:00:00Z", 86400},
	}
	for _, tt := range tests {
		t.Run(tt.now, func(t *testing.T) {
			if got := UntilNextUTCMidnight(at(tt.now)); got != tt.want {
				t.Errorf("UntilNextUTCMidnight(%s) = %d, want %d", tt.now, got, tt.want)
			}
		})
	}
}

// Retry-After is the whole seconds a caller must wait: rounded up, so that a retry on time never
// comes before midnight.
func TestUntilNextUTCMidnightRoundsUp(t *testing.T) {
	now := time.Date(2026, 3, 14, 0, 0, 0, 999_500_000, time.UTC) // 86399.0005 s to midnight
	if got := UntilNextUTCMidnight(now); got != 86400 {
		t.Errorf("UntilNextUTCMidnight = %d, want 86400", got)
	}
}
