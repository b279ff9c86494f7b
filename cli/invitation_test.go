package cli

import "testing"

func TestInvitationCreateFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdInvitationCreate, []flagCase[invitationCreateOptions]{
		{name: "organization and email", args: []string{"org_1", "ada@example.com"},
			want: invitationCreateOptions{OrganizationID: "org_1", Email: "ada@example.com"}},
		{name: "idempotency key", args: []string{"org_1", "ada@example.com", "--idempotency-key", "k"},
			want: invitationCreateOptions{OrganizationID: "org_1", Email: "ada@example.com", IdempotencyKey: "k"}},
		{name: "no email", args: []string{"org_1"}, wantErr: "missing argument EMAIL"},
		{name: "three arguments", args: []string{"org_1", "a@example.com", "b@example.com"}, wantErr: `unexpected argument "b@example.com"`},
	})
}

func TestInvitationListFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdInvitationList, []flagCase[invitationListOptions]{
		{name: "organization", args: []string{"org_1"}, want: invitationListOptions{OrganizationID: "org_1"}},
		{name: "state", args: []string{"org_1", "--state", "pending"}, want: invitationListOptions{OrganizationID: "org_1", State: "pending"}},
		{name: "no organization", args: nil, wantErr: "missing argument ORGANIZATION_ID"},
		{name: "state without value", args: []string{"org_1", "--state"}, wantErr: "flag needs an argument: --state"},
	})
}

func TestInvitationGetFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdInvitationGet, []flagCase[invitationGetOptions]{
		{name: "organization and invitation", args: []string{"org_1", "inv_1"},
			want: invitationGetOptions{OrganizationID: "org_1", InvitationID: "inv_1"}},
		{name: "no invitation", args: []string{"org_1"}, wantErr: "missing argument INVITATION_ID"},
	})
}

func TestInvitationRevokeFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdInvitationRevoke, []flagCase[invitationRevokeOptions]{
		{name: "organization and invitation, asked on a terminal", args: []string{"org_1", "inv_1"}, terminal: true,
			want: invitationRevokeOptions{OrganizationID: "org_1", InvitationID: "inv_1"}},
		{name: "yes", args: []string{"org_1", "inv_1", "--yes"},
			want: invitationRevokeOptions{OrganizationID: "org_1", InvitationID: "inv_1", Yes: true}},
		{name: "idempotency key", args: []string{"org_1", "inv_1", "--idempotency-key", "k", "--yes"},
			want: invitationRevokeOptions{OrganizationID: "org_1", InvitationID: "inv_1", IdempotencyKey: "k", Yes: true}},
		{name: "no terminal and no yes", args: []string{"org_1", "inv_1"}, wantErr: "revoking inv_1 needs confirmation, and stdin is not a terminal to ask on: pass --yes"},
		{name: "no arguments", args: nil, wantErr: "missing arguments ORGANIZATION_ID INVITATION_ID"},
	})
}
