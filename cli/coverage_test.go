package cli_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"renga.dev/renga/cli"
	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/pipeline"
	"renga.dev/renga/server/servertest"
)

// commandFor names the command of every API operation. An operation added to openapi.yaml
// without a command (and an entry here) fails TestEveryOperationHasACommand.
var commandFor = map[string][]string{
	"getDeployment":                       {"deployment", "show"},
	"getTokenSelf":                        {"token", "show"},
	"revokeTokenSelf":                     {"token", "revoke-self"},
	"listOrganizations":                   {"org", "list"},
	"createOrganization":                  {"org", "create"},
	"getOrganization":                     {"org", "get"},
	"updateOrganization":                  {"org", "update"},
	"listAuditEvents":                     {"audit", "list"},
	"suspendOrganization":                 {"org", "suspend"},
	"resumeOrganization":                  {"org", "resume"},
	"scheduleOrganizationDeletion":        {"org", "delete"},
	"cancelOrganizationDeletion":          {"org", "undelete"},
	"listOrganizationOwners":              {"org", "owners"},
	"createInvitation":                    {"org", "invite"},
	"listInvitations":                     {"invitation", "list"},
	"getInvitation":                       {"invitation", "get"},
	"revokeInvitation":                    {"invitation", "revoke"},
	"getPolicy":                           {"policy", "get"},
	"putPolicy":                           {"policy", "set"},
	"getEffectivePolicy":                  {"policy", "effective"},
	"getOrganizationUsage":                {"usage"},
	"listUsage":                           {"usage"},
	"acceptInvitation":                    {"owner", "accept"},
	"getMe":                               {"owner", "me"},
	"listActivity":                        {"owner", "activity"},
	"getSettings":                         {"owner", "settings", "get"},
	"putSettings":                         {"owner", "settings", "set"},
	"listIntakeKeys":                      {"owner", "intake-key", "list"},
	"createIntakeKey":                     {"owner", "intake-key", "create"},
	"revokeIntakeKey":                     {"owner", "intake-key", "revoke"},
	"rotateIntakeKey":                     {"owner", "intake-key", "rotate"},
	"listOrganizationIdentityProviders":   {"owner", "identity-provider", "list"},
	"createOrganizationIdentityProvider":  {"owner", "identity-provider", "create"},
	"disableOrganizationIdentityProvider": {"owner", "identity-provider", "disable"},
	"listAgents":                          {"owner", "agents"},
	"listObservations":                    {"owner", "observations"},
	"createJob":                           {"owner", "job", "create"},
	"listJobs":                            {"owner", "job", "list"},
	"listIdentityProviders":               {"identity-provider", "list"},
	"createIdentityProvider":              {"identity-provider", "create"},
	"getIdentityProvider":                 {"identity-provider", "get"},
	"putIdentityProvider":                 {"identity-provider", "set"},
	"deleteIdentityProvider":              {"identity-provider", "delete"},
	"disableIdentityProvider":             {"identity-provider", "disable"},
	"startIdentityProviderTest":           {"identity-provider", "test"},
	"getSupportSource":                    {"support", "status"},
	"putSupportSource":                    {"support", "enable"},
	"getSupportAccess":                    {"support", "access"},
	"listSupportGrants":                   {"owner", "support-grant", "list"},
	"createSupportGrant":                  {"owner", "support-grant", "create"},
	"revokeSupportGrant":                  {"owner", "support-grant", "revoke"},
	"createExport":                        {"transfer", "export"},
	"listTransfers":                       {"transfer", "list"},
	"getTransfer":                         {"transfer", "status"},
	"cancelTransfer":                      {"transfer", "cancel"},
	"createDownloadAuthorization":         {"transfer", "download"},
	"getTransferArchive":                  {"transfer", "download"},
	"importOrganization":                  {"transfer", "import"},
	"completeTransfer":                    {"transfer", "complete"},
	// The agent's own operations are the agent program's (renga agent run), not commands.
	"getHome":              nil,
	"registerInstallation": nil,
	"submitObservations":   nil,
	"listAgentJobs":        nil,
	"submitJobResult":      nil,
}

func TestEveryOperationHasACommand(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	ops, err := pipeline.Operations(spec)
	if err != nil {
		t.Fatal(err)
	}
	root := cli.NewRootCommand(&cli.Factory{Getenv: func(string) string { return "" }})
	for _, op := range ops {
		args, ok := commandFor[op.ID]
		if !ok {
			t.Errorf("operation %s has no CLI command", op.ID)
			continue
		}
		if args == nil {
			if op.Auth != "installation" && op.Auth != "intake" && op.ID != "getHome" {
				t.Errorf("operation %s is exempt from having a command but is not the agent's", op.ID)
			}
			continue
		}
		cmd, rest, err := root.Find(args)
		if err != nil || len(rest) != 0 || cmd.RunE == nil || cmd.CommandPath() != "renga "+strings.Join(args, " ") {
			t.Errorf("operation %s: command %v not found (%v)", op.ID, args, err)
		}
		// Mutating commands take --idempotency-key (unauthenticated operations have no key).
		if op.Mutation && op.Auth != "public" && cmd.Flags().Lookup("idempotency-key") == nil {
			t.Errorf("%v does not take --idempotency-key", args)
		}
		if op.IfMatch && cmd.Flags().Lookup("if-match") == nil {
			t.Errorf("%v does not take --if-match", args)
		}
	}
}

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	env := map[string]string{"RENGA_DATABASE_URL": servertest.NewDatabase(t)}
	if r := run(t, env, "migrate", "status"); r.code != 0 || !strings.Contains(r.stdout, "0 pending") {
		t.Errorf("status on a migrated database: %+v", r)
	}
	if r := run(t, env, "migrate"); r.code != 0 || !strings.Contains(r.stdout, "0 pending") {
		t.Errorf("migrate up again: %+v", r)
	}
	if r := run(t, env, "migrate", "sideways"); r.code != cli.ExitUsage {
		t.Errorf("unknown action: %+v", r)
	}
	if r := run(t, map[string]string{}, "migrate"); r.code != cli.ExitUsage {
		t.Errorf("no database: %+v", r)
	}
}

func TestHealthReadinessMetrics(t *testing.T) {
	t.Parallel()
	e := servertest.Start(t)
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready", "/metrics": "renga_http_requests_total"} {
		// One API request first, so the request counter has a sample.
		_, _ = http.Get(e.URL + "/api/v1/operator/deployment")
		resp, err := http.Get(e.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d %q", path, resp.StatusCode, b)
		}
	}
	// readyz fails when the database is gone.
	e.Pool.Close()
	resp, err := http.Get(e.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("readyz without a database: %d", resp.StatusCode)
	}
}
