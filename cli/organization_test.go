package cli

import "testing"

func TestOrganizationCreateFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOrganizationCreate, []flagCase[organizationCreateOptions]{
		{name: "slug and display name", args: []string{"acme", "--display-name", "Acme Corporation"},
			want: organizationCreateOptions{Slug: "acme", DisplayName: "Acme Corporation"}},
		{name: "idempotency key", args: []string{"acme", "--display-name", "Acme", "--idempotency-key", "k1"},
			want: organizationCreateOptions{Slug: "acme", DisplayName: "Acme", IdempotencyKey: "k1"}},
		{name: "no display name", args: []string{"acme"}, wantErr: `required flag(s) "display-name" not set`},
		{name: "no slug", args: []string{"--display-name", "Acme"}, wantErr: "missing argument SLUG"},
		{name: "two slugs", args: []string{"a", "b", "--display-name", "Acme"}, wantErr: `unexpected argument "b"`},
		{name: "unknown flag", args: []string{"acme", "--display-name", "Acme", "--name", "x"}, wantErr: "unknown flag: --name"},
	})
}

func TestOrganizationListFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOrganizationList, []flagCase[organizationListOptions]{
		{name: "no flags", args: nil, want: organizationListOptions{}},
		{name: "every flag", args: []string{"--state", "suspended", "--slug", "acme", "--page-size", "50", "--page-token", "tok", "--all"},
			want: organizationListOptions{State: "suspended", Slug: "acme", PageSize: 50, PageToken: "tok", All: true}},
		{name: "page size not a number", args: []string{"--page-size", "ten"}, wantErr: `invalid argument "ten" for "--page-size"`},
		{name: "an argument", args: []string{"acme"}, wantErr: `unexpected argument "acme"`},
	})
}

func TestOrganizationGetFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOrganizationGet, []flagCase[organizationGetOptions]{
		{name: "id", args: []string{"org_1"}, want: organizationGetOptions{OrganizationID: "org_1"}},
		{name: "no id", args: nil, wantErr: "missing argument ORGANIZATION_ID"},
		{name: "two ids", args: []string{"org_1", "org_2"}, wantErr: `unexpected argument "org_2"`},
	})
}

func TestOrganizationUpdateFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOrganizationUpdate, []flagCase[organizationUpdateOptions]{
		{name: "version", args: []string{"org_1", "--display-name", "Acme Inc.", "--if-match", "3"},
			want: organizationUpdateOptions{OrganizationID: "org_1", DisplayName: "Acme Inc.", IfMatch: "3"}},
		{name: "quoted version and key", args: []string{"org_1", "--display-name", "A", "--if-match", `"3"`, "--idempotency-key", "k"},
			want: organizationUpdateOptions{OrganizationID: "org_1", DisplayName: "A", IfMatch: `"3"`, IdempotencyKey: "k"}},
		{name: "current", args: []string{"org_1", "--display-name", "A", "--if-match", "current"},
			want: organizationUpdateOptions{OrganizationID: "org_1", DisplayName: "A", IfMatch: "current"}},
		{name: "no if-match", args: []string{"org_1", "--display-name", "A"}, wantErr: `required flag(s) "if-match" not set`},
		{name: "no display name", args: []string{"org_1", "--if-match", "3"}, wantErr: `required flag(s) "display-name" not set`},
		{name: "no id", args: []string{"--display-name", "A", "--if-match", "3"}, wantErr: "missing argument ORGANIZATION_ID"},
	})
}

func TestOrganizationSuspendFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOrganizationSuspend, []flagCase[organizationSuspendOptions]{
		{name: "reason, asked on a terminal", args: []string{"org_1", "--reason", "unpaid"}, terminal: true,
			want: organizationSuspendOptions{OrganizationID: "org_1", Reason: "unpaid"}},
		{name: "yes", args: []string{"org_1", "--reason", "unpaid", "--yes"},
			want: organizationSuspendOptions{OrganizationID: "org_1", Reason: "unpaid", Yes: true}},
		{name: "idempotency key", args: []string{"org_1", "--reason", "unpaid", "--idempotency-key", "k", "--yes"},
			want: organizationSuspendOptions{OrganizationID: "org_1", Reason: "unpaid", IdempotencyKey: "k", Yes: true}},
		{name: "no terminal and no yes", args: []string{"org_1", "--reason", "unpaid"},
			wantErr: "suspending org_1 needs confirmation, and stdin is not a terminal to ask on: pass --yes to confirm"},
		{name: "no reason", args: []string{"org_1"}, wantErr: `required flag(s) "reason" not set`},
		{name: "no id", args: []string{"--reason", "unpaid"}, wantErr: "missing argument ORGANIZATION_ID"},
	})
}

func TestOrganizationResumeFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOrganizationResume, []flagCase[organizationResumeOptions]{
		{name: "id", args: []string{"org_1"}, want: organizationResumeOptions{OrganizationID: "org_1"}},
		{name: "idempotency key", args: []string{"org_1", "--idempotency-key", "k"},
			want: organizationResumeOptions{OrganizationID: "org_1", IdempotencyKey: "k"}},
		{name: "no id", args: nil, wantErr: "missing argument ORGANIZATION_ID"},
		{name: "reason is suspend's", args: []string{"org_1", "--reason", "x"}, wantErr: "unknown flag: --reason"},
	})
}

func TestOrganizationDeleteFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOrganizationDelete, []flagCase[organizationDeleteOptions]{
		{name: "id, asked on a terminal", args: []string{"org_1"}, terminal: true, want: organizationDeleteOptions{OrganizationID: "org_1"}},
		{name: "yes", args: []string{"org_1", "--yes"}, want: organizationDeleteOptions{OrganizationID: "org_1", Yes: true}},
		{name: "yes on a terminal", args: []string{"org_1", "--yes"}, terminal: true, want: organizationDeleteOptions{OrganizationID: "org_1", Yes: true}},
		{name: "idempotency key", args: []string{"org_1", "--idempotency-key", "k", "--yes"},
			want: organizationDeleteOptions{OrganizationID: "org_1", IdempotencyKey: "k", Yes: true}},
		{name: "no terminal and no yes", args: []string{"org_1"}, wantErr: "deleting org_1 needs confirmation"},
		{name: "no id", args: nil, wantErr: "missing argument ORGANIZATION_ID"},
		{name: "two ids", args: []string{"org_1", "org_2"}, wantErr: `unexpected argument "org_2"`},
	})
}

func TestOrganizationUndeleteFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOrganizationUndelete, []flagCase[organizationUndeleteOptions]{
		{name: "id", args: []string{"org_1"}, want: organizationUndeleteOptions{OrganizationID: "org_1"}},
		{name: "idempotency key", args: []string{"org_1", "--idempotency-key", "k"},
			want: organizationUndeleteOptions{OrganizationID: "org_1", IdempotencyKey: "k"}},
		{name: "no id", args: nil, wantErr: "missing argument ORGANIZATION_ID"},
	})
}

func TestOrganizationOwnersFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdOrganizationOwners, []flagCase[organizationOwnersOptions]{
		{name: "id", args: []string{"org_1"}, want: organizationOwnersOptions{OrganizationID: "org_1"}},
		{name: "no id", args: nil, wantErr: "missing argument ORGANIZATION_ID"},
		{name: "no idempotency key on a read", args: []string{"org_1", "--idempotency-key", "k"}, wantErr: "unknown flag: --idempotency-key"},
	})
}
