// Package acctest runs the provider's acceptance tests: the machine's terraform binary drives
// the provider in-process (terraform-plugin-testing) against a real Renga server on a fresh
// real PostgreSQL database per test (server/servertest).
package acctest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/apiclient"
	"renga.dev/renga/provider/internal/provider"
	"renga.dev/renga/server/servertest"
)

// Main runs a package's acceptance tests. They run offline: with TF_ACC unset it is set when a
// terraform binary is on PATH (and TF_ACC_TERRAFORM_PATH points at it), so `go test` runs them
// without further set-up; without terraform they are skipped, unless TF_ACC asks for them.
func Main(m *testing.M) {
	if os.Getenv("TF_ACC_TERRAFORM_PATH") == "" {
		if tf, err := exec.LookPath("terraform"); err == nil {
			_ = os.Setenv("TF_ACC_TERRAFORM_PATH", tf)
		}
	}
	if os.Getenv("TF_ACC") == "" {
		if os.Getenv("TF_ACC_TERRAFORM_PATH") != "" {
			_ = os.Setenv("TF_ACC", "1")
		} else {
			fmt.Fprintln(os.Stderr, "acctest: no terraform on PATH; acceptance tests are skipped")
		}
	}
	// No update checks, and an empty CLI configuration instead of whatever the environment
	// points at (acceptance tests run the provider in-process, so none is needed).
	_ = os.Setenv("CHECKPOINT_DISABLE", "1")
	dir, err := os.MkdirTemp("", "renga-acctest-")
	if err == nil {
		cfg := filepath.Join(dir, "terraformrc")
		if os.WriteFile(cfg, nil, 0o600) == nil {
			_ = os.Setenv("TF_CLI_CONFIG_FILE", cfg)
		}
	}
	code := servertest.Run(m)
	if dir != "" {
		_ = os.RemoveAll(dir) // before the exit: a deferred removal would never run
	}
	os.Exit(code)
}

// Env is a running Renga server and what a test needs to drive it.
type Env struct {
	// Server is the running server and its database.
	Server *servertest.Env
	// URL is the server's base URL.
	URL string
	// Token is an operator token with every scope.
	Token string
	// API is a client of the server, outside Terraform: for checks and out-of-band changes.
	API *client.ClientWithResponses
}

// Start runs a server on a fresh database for t.
func Start(t *testing.T, opts ...servertest.Option) *Env {
	t.Helper()
	env := servertest.Start(t, opts...)
	token := env.Token(t, servertest.AllScopes()...)
	return &Env{Server: env, URL: env.URL, Token: token, API: NewAPI(t, env.URL, token)}
}

// NewAPI is a generated client for url authenticated with token, without retries.
func NewAPI(t *testing.T, url, token string) *client.ClientWithResponses {
	t.Helper()
	c, err := client.NewClientWithResponses(url, client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
		req.Header.Set("Authorization", "Bearer "+token)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ProviderConfig is a provider block for url and token.
func ProviderConfig(url, token string) string {
	return fmt.Sprintf("provider \"renga\" {\n  url   = %q\n  token = %q\n}\n", url, token)
}

// Config is the provider block for this server followed by body.
func (e *Env) Config(body string) string { return ProviderConfig(e.URL, e.Token) + body }

// FastRetries retries as the provider does, without the waiting.
var FastRetries = apiclient.RetryPolicy{MaxAttempts: 5, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}

// Factories runs the provider in-process, with fast retries and opts.
func Factories(opts ...provider.Option) map[string]func() (tfprotov6.ProviderServer, error) {
	opts = append([]provider.Option{provider.WithRetryPolicy(FastRetries)}, opts...)
	return map[string]func() (tfprotov6.ProviderServer, error){
		"renga": providerserver.NewProtocol6WithError(provider.New("test", opts...)()),
	}
}

// Name is prefix with a random suffix: a valid slug, unique per test run.
func Name(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// CreateOrganization creates an organization outside Terraform.
func (e *Env) CreateOrganization(t *testing.T, slug, name string) client.Organization {
	t.Helper()
	res, err := e.API.CreateOrganizationWithResponse(context.Background(),
		&client.CreateOrganizationParams{IdempotencyKey: Name("test")}, client.OrganizationCreate{Slug: slug, DisplayName: name})
	if err != nil {
		t.Fatal(err)
	}
	if res.JSON201 == nil {
		t.Fatalf("create organization: %d %s", res.StatusCode(), res.Body)
	}
	return *res.JSON201
}

// Organizations lists the organizations with slug.
func (e *Env) Organizations(slug string) ([]client.Organization, error) {
	res, err := e.API.ListOrganizationsWithResponse(context.Background(), &client.ListOrganizationsParams{Slug: &slug})
	if err != nil {
		return nil, err
	}
	if res.JSON200 == nil {
		return nil, fmt.Errorf("list organizations: %d %s", res.StatusCode(), res.Body)
	}
	return res.JSON200.Items, nil
}

// Policy reads an organization's policy document.
func (e *Env) Policy(orgID string) (client.Policy, error) {
	res, err := e.API.GetPolicyWithResponse(context.Background(), orgID)
	if err != nil {
		return client.Policy{}, err
	}
	if res.JSON200 == nil {
		return client.Policy{}, fmt.Errorf("get policy: %d %s", res.StatusCode(), res.Body)
	}
	return *res.JSON200, nil
}

// PutPolicy replaces an organization's policy outside Terraform (reading its version first).
func (e *Env) PutPolicy(orgID string, doc client.PolicyWrite) (client.Policy, error) {
	cur, err := e.Policy(orgID)
	if err != nil {
		return client.Policy{}, err
	}
	res, err := e.API.PutPolicyWithResponse(context.Background(), orgID, &client.PutPolicyParams{IfMatch: apiclient.IfMatch(cur.Version)}, doc)
	if err != nil {
		return client.Policy{}, err
	}
	if res.JSON200 == nil {
		return client.Policy{}, fmt.Errorf("put policy: %d %s", res.StatusCode(), res.Body)
	}
	return *res.JSON200, nil
}

// Before runs f between a step's plan and its apply (as a pre-apply plan check): what happens
// to the deployment while a saved plan waits to be applied.
func Before(f func() error) plancheck.PlanCheck { return beforeApply(f) }

type beforeApply func() error

func (f beforeApply) CheckPlan(_ context.Context, _ plancheck.CheckPlanRequest, resp *plancheck.CheckPlanResponse) {
	resp.Error = f()
}

// ErrorText matches a diagnostic containing the phrases in order, however terraform wrapped
// their lines.
func ErrorText(phrases ...string) *regexp.Regexp {
	quoted := make([]string, len(phrases))
	for i, p := range phrases {
		quoted[i] = strings.Join(strings.Fields(regexp.QuoteMeta(p)), `\s+`)
	}
	return regexp.MustCompile(`(?s)` + strings.Join(quoted, ".*"))
}
