package pipeline

import (
	"net/http"
	"net/netip"
	"reflect"
	"testing"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/domain"
)

func TestAudited(t *testing.T) {
	tests := []struct {
		actorType string
		want      bool
	}{
		{domain.ActorOperatorToken, true},
		{domain.ActorLocalOperator, true},
		{domain.ActorUser, true},
		{domain.ActorIntakeKey, true},
		{domain.ActorInstallation, false},
		{domain.ActorSystem, false},
		{"", false},
		{"unknown", false},
	}
	for _, tt := range tests {
		t.Run(tt.actorType, func(t *testing.T) {
			if got := audited(Actor{Type: tt.actorType}); got != tt.want {
				t.Errorf("audited(%q) = %v, want %v", tt.actorType, got, tt.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestAuditEvent(t *testing.T) {
	op := &Operation{ID: "updateOrganization"}
	tests := []struct {
		name    string
		st      State
		outcome string
		status  int
		code    api.ErrorCode
		want    domain.AuditEvent
	}{
		{
			name: "operator token, organization and token named, failed",
			st: State{ID: "req_1", Op: op, Source: netip.MustParseAddr("198.51.100.7"),
				Actor: Actor{Type: domain.ActorOperatorToken, ID: "tok_1", Name: "ci", CredentialID: "tok_1", Scopes: []string{"organizations:write"}},
				Audit: AuditNote{OrganizationID: "org_1", OrganizationName: "Acme", TokenID: "tok_2", ChangedFields: []string{"display_name"}}},
			outcome: domain.OutcomeFailed, status: http.StatusConflict, code: api.ErrorCodeSlugTaken,
			want: domain.AuditEvent{RequestID: "req_1", ActorType: domain.ActorOperatorToken, ActorID: "tok_1", ActorName: "ci",
				Operation: "updateOrganization", OrganizationID: ptr("org_1"), OrganizationNameSnapshot: ptr("Acme"), TokenID: ptr("tok_2"),
				Outcome: domain.OutcomeFailed, Status: http.StatusConflict, Error: ptr("slug_taken"),
				ChangedFields: []string{"display_name"}, SourceAddress: "198.51.100.7"},
		},
		{
			name: "local operator with its invocation, succeeded",
			st: State{ID: "req_2", Op: op, Source: netip.MustParseAddr("127.0.0.1"), Local: true, Invocation: "inv_1",
				Actor: Actor{Type: domain.ActorLocalOperator, ID: domain.LocalOperatorID, Name: "local operator", InvocationID: "inv_1"}},
			outcome: domain.OutcomeSucceeded, status: http.StatusOK,
			want: domain.AuditEvent{RequestID: "req_2", ActorType: domain.ActorLocalOperator, ActorID: domain.LocalOperatorID,
				ActorName: "local operator", InvocationID: ptr("inv_1"), Operation: "updateOrganization",
				Outcome: domain.OutcomeSucceeded, Status: http.StatusOK, SourceAddress: "local"},
		},
		{
			name:    "no source address",
			st:      State{ID: "req_3", Op: op, Actor: Actor{Type: domain.ActorUser, ID: "usr_1", Name: "ann@example.com"}},
			outcome: domain.OutcomeDenied, status: http.StatusForbidden, code: api.ErrorCodeInsufficientScope,
			want: domain.AuditEvent{RequestID: "req_3", ActorType: domain.ActorUser, ActorID: "usr_1", ActorName: "ann@example.com",
				Operation: "updateOrganization", Outcome: domain.OutcomeDenied, Status: http.StatusForbidden,
				Error: ptr("insufficient_scope"), SourceAddress: "unknown"},
		},
		{
			name: "organization named without a name: an empty snapshot",
			st: State{ID: "req_4", Op: op, Source: netip.MustParseAddr("2001:db8::1"),
				Actor: Actor{Type: domain.ActorIntakeKey, ID: "key_1", OrganizationID: "org_9", OrganizationName: "Not used"},
				Audit: AuditNote{OrganizationID: "org_1"}},
			outcome: domain.OutcomeSucceeded, status: http.StatusCreated,
			want: domain.AuditEvent{RequestID: "req_4", ActorType: domain.ActorIntakeKey, ActorID: "key_1", Operation: "updateOrganization",
				OrganizationID: ptr("org_1"), OrganizationNameSnapshot: ptr(""), Outcome: domain.OutcomeSucceeded,
				Status: http.StatusCreated, SourceAddress: "2001:db8::1"},
		},
		{
			name: "a name without an organization is left out",
			st: State{ID: "req_5", Op: op, Source: netip.MustParseAddr("198.51.100.7"),
				Actor: Actor{Type: domain.ActorOperatorToken, ID: "tok_1"}, Audit: AuditNote{OrganizationName: "Acme"}},
			outcome: domain.OutcomeFailed, status: http.StatusInternalServerError, code: api.ErrorCodeInternal,
			want: domain.AuditEvent{RequestID: "req_5", ActorType: domain.ActorOperatorToken, ActorID: "tok_1", Operation: "updateOrganization",
				Outcome: domain.OutcomeFailed, Status: http.StatusInternalServerError, Error: ptr("internal"), SourceAddress: "198.51.100.7"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := auditEvent(&tt.st, tt.outcome, tt.status, tt.code)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("auditEvent =\n%s\nwant\n%s", show(got), show(tt.want))
			}
		})
	}
}

func show(e domain.AuditEvent) string {
	s := func(p *string) string {
		if p == nil {
			return "<nil>"
		}
		return "&" + *p
	}
	return "request " + e.RequestID + ", actor " + e.ActorType + "/" + e.ActorID + "/" + e.ActorName +
		", invocation " + s(e.InvocationID) + ", operation " + e.Operation + ", organization " + s(e.OrganizationID) +
		"/" + s(e.OrganizationNameSnapshot) + ", token " + s(e.TokenID) + ", outcome " + e.Outcome +
		", status " + http.StatusText(e.Status) + ", error " + s(e.Error) + ", source " + e.SourceAddress
}

func TestSucceeded(t *testing.T) {
	op := &Operation{ID: "createThing"}
	for _, actorType := range []string{domain.ActorOperatorToken, domain.ActorLocalOperator, domain.ActorUser, domain.ActorIntakeKey} {
		t.Run(actorType, func(t *testing.T) {
			st := &State{ID: "req_1", Op: op, Actor: Actor{Type: actorType, ID: "a_1"}, Source: netip.MustParseAddr("198.51.100.7")}
			e := succeeded(st, http.StatusCreated)
			if e == nil {
				t.Fatal("no event")
			}
			if e.Outcome != domain.OutcomeSucceeded || e.Status != http.StatusCreated || e.Error != nil || e.Operation != "createThing" || e.ActorID != "a_1" {
				t.Errorf("event = %s", show(*e))
			}
		})
	}
	for _, actorType := range []string{domain.ActorInstallation, domain.ActorSystem, ""} {
		t.Run("not audited/"+actorType, func(t *testing.T) {
			if e := succeeded(&State{Op: op, Actor: Actor{Type: actorType}}, http.StatusOK); e != nil {
				t.Errorf("event = %s, want none", show(*e))
			}
		})
	}
}

func TestOrganizationIDPattern(t *testing.T) {
	tests := []struct {
		id   string
		want bool
	}{
		{"org_0123456789abcdefghjkmnpqrs", true},
		{"org_0123456789abcdefghjkmnpqr", false},   // 25
		{"org_0123456789abcdefghjkmnpqrst", false}, // 27
		{"org_0123456789ABCDEFGHJKMNPQRS", false},
		{"tok_0123456789abcdefghjkmnpqrs", false},
		{"org_0123456789abcdefghjkmnpq-s", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := organizationIDPattern.MatchString(tt.id); got != tt.want {
			t.Errorf("organizationIDPattern matches %q = %v, want %v", tt.id, got, tt.want)
		}
	}
}
