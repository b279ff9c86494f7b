// Package provider is the Renga Terraform provider: its configuration and the list of its
// resources and data sources.
package provider

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"renga.dev/renga/provider/internal/apiclient"
	"renga.dev/renga/provider/internal/deployment"
	"renga.dev/renga/provider/internal/identityprovider"
	"renga.dev/renga/provider/internal/organization"
	"renga.dev/renga/provider/internal/organizationpolicy"
	"renga.dev/renga/provider/internal/organizations"
	"renga.dev/renga/provider/internal/organizationusage"
	"renga.dev/renga/provider/internal/ownerinvitation"
	"renga.dev/renga/provider/internal/supportsource"
)

var _ provider.Provider = (*rengaProvider)(nil)

// Option adjusts how the provider reaches the API (tests shorten retries).
type Option func(*apiclient.Config)

// WithRetryPolicy replaces the default retry policy.
func WithRetryPolicy(p apiclient.RetryPolicy) Option {
	return func(c *apiclient.Config) { c.Retry = p }
}

// New returns the provider's constructor for providerserver.
func New(version string, opts ...Option) func() provider.Provider {
	return func() provider.Provider {
		return &rengaProvider{version: version, opts: opts}
	}
}

type rengaProvider struct {
	version string
	opts    []Option
}

type providerModel struct {
	URL   types.String `tfsdk:"url"`
	Token types.String `tfsdk:"token"`
}

func (p *rengaProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "renga"
	resp.Version = p.version
}

func (p *rengaProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Manages a Renga deployment through its operator API: " +
			"organizations, their policy documents and owner invitations, the deployment's identity providers and its support source.\n\n" +
			"The provider authenticates with an **operator token** (`renga_operator_...`), minted on the " +
			"server host with `renga operator-token create`. Give it the scopes the configuration needs: " +
			"`organizations:write`, `policies:write`, `providers:write` (identity providers), `support:write` (the support source), " +
			"and for the data sources `deployment:read` and `usage:read`. " +
			"A missing scope is reported with its name.\n\n" +
			"**Retries and idempotency.** Network errors, `502`, `503`, `504` and `429` (after its " +
			"`Retry-After`) are retried. Every create sends an `Idempotency-Key` derived from the " +
			"resource's create request (a SHA-256 of the resource type, the path and the canonical " +
			"request body), and retries reuse it, so a create whose response was lost after the server " +
			"committed it is answered from the server's stored result: the retry, or the next " +
			"`terraform apply`, adopts the object instead of creating a second one. The server keeps " +
			"keyed results for " + apiclient.KeyRetention + " (`RENGA_IDEMPOTENCY_RETENTION`); after that " +
			"window an interrupted create that did commit is no longer recognised, and the next apply " +
			"fails on the taken slug (organizations, identity providers) or sends a second invitation. Keys are per operator " +
			"token: re-run an interrupted apply with the same token.\n\n" +
			"**Concurrency.** Versioned writes (an organization's display name, a policy document, an identity provider, the support source) send " +
			"the version held in state as `If-Match`, once. When the object changed outside Terraform " +
			"the server answers `412` and the apply stops with an error; it is never retried and nothing " +
			"is overwritten. Run `terraform plan` (or `terraform apply -refresh-only`) to see the change, then apply again.",
		Attributes: map[string]schema.Attribute{
			"url": schema.StringAttribute{
				MarkdownDescription: "Base URL of the deployment, e.g. `https://renga.example.com` (`http://127.0.0.1:8080` for `renga serve --dev`). Defaults to the `RENGA_URL` environment variable.",
				Optional:            true,
			},
			"token": schema.StringAttribute{
				MarkdownDescription: "Operator token, `renga_operator_<secret>`. Defaults to the `RENGA_OPERATOR_TOKEN` environment variable. Prefer the environment variable: a token in the configuration ends up in plan files.",
				Optional:            true,
				Sensitive:           true,
			},
		},
	}
}

func (p *rengaProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg.URL.IsUnknown() {
		resp.Diagnostics.AddAttributeError(path.Root("url"), "Unknown Renga URL",
			"The provider's url depends on a value known only after apply. Set it to a literal, a variable, or use the RENGA_URL environment variable.")
	}
	if cfg.Token.IsUnknown() {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Unknown Renga operator token",
			"The provider's token depends on a value known only after apply. Set it to a variable, or use the RENGA_OPERATOR_TOKEN environment variable.")
	}
	if resp.Diagnostics.HasError() {
		return
	}
	url, token := os.Getenv("RENGA_URL"), os.Getenv("RENGA_OPERATOR_TOKEN")
	if !cfg.URL.IsNull() {
		url = cfg.URL.ValueString()
	}
	if !cfg.Token.IsNull() {
		token = cfg.Token.ValueString()
	}
	if url == "" {
		resp.Diagnostics.AddAttributeError(path.Root("url"), "Missing Renga URL",
			"Set the provider's url argument or the RENGA_URL environment variable to the deployment's base URL, e.g. https://renga.example.com (renga serve --dev prints it).")
	} else if _, err := apiclient.ParseURL(url); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("url"), "Invalid Renga URL",
			fmt.Sprintf("The URL %q cannot be used: %v. Expected the deployment's base URL, e.g. https://renga.example.com.", url, err))
	}
	if token == "" {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Missing Renga operator token",
			"Set the RENGA_OPERATOR_TOKEN environment variable (or the provider's token argument) to an operator token, renga_operator_<secret>. Mint one on the server host with `renga operator-token create --name terraform --scope organizations:write --scope policies:write`.")
	} else if !strings.HasPrefix(token, apiclient.TokenPrefix) {
		resp.Diagnostics.AddAttributeError(path.Root("token"), "Not an operator token",
			"The token does not start with renga_operator_. The provider needs an operator token (renga operator-token create), not a personal API key or an intake key.")
	}
	if resp.Diagnostics.HasError() {
		return
	}

	apiCfg := apiclient.Config{URL: url, Token: token, UserAgent: "terraform-provider-renga/" + p.version}
	for _, o := range p.opts {
		o(&apiCfg)
	}
	c, err := apiclient.New(apiCfg)
	if err != nil {
		resp.Diagnostics.AddError("Cannot create the Renga API client", err.Error())
		return
	}
	// Check the token once, so a bad one fails here with a clear message rather than on the
	// first resource.
	self, err := c.API.GetTokenSelfWithResponse(ctx)
	if err != nil || self.JSON200 == nil {
		summary, detail := apiclient.Describe("check the operator token at "+url, self, err)
		resp.Diagnostics.AddAttributeError(path.Root("token"), summary, detail)
		return
	}
	tflog.Debug(ctx, "Renga operator token checked", map[string]any{"token_id": self.JSON200.Id, "token_name": self.JSON200.Name})
	resp.DataSourceData = c
	resp.ResourceData = c
}

func (p *rengaProvider) Resources(_ context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		organization.NewResource,
		organizationpolicy.NewResource,
		ownerinvitation.NewResource,
		identityprovider.NewResource,
		supportsource.NewResource,
	}
}

func (p *rengaProvider) DataSources(_ context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{
		deployment.NewDataSource,
		organization.NewDataSource,
		organizations.NewDataSource,
		organizationusage.NewDataSource,
	}
}
