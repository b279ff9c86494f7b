// Package deployment is the renga_deployment data source.
package deployment

import (
	"context"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"renga.dev/renga/provider/internal/apiclient"
	"renga.dev/renga/provider/internal/policydoc"
	"renga.dev/renga/server/domain/policyfield"
)

var (
	_ datasource.DataSource              = (*DataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*DataSource)(nil)
)

// DataSource is the renga_deployment data source.
type DataSource struct {
	client *apiclient.Client
}

// NewDataSource returns the renga_deployment data source.
func NewDataSource() datasource.DataSource { return &DataSource{} }

type defaultsModel struct {
	Limits         types.Object `tfsdk:"limits"`
	LockedSettings types.Object `tfsdk:"locked_settings"`
	Entitlements   types.Object `tfsdk:"entitlements"`
}

type model struct {
	Identifier          types.String   `tfsdk:"identifier"`
	PublicURL           types.String   `tfsdk:"public_url"`
	Environment         types.String   `tfsdk:"environment"`
	Version             types.String   `tfsdk:"version"`
	DeletionGracePeriod types.String   `tfsdk:"deletion_grace_period"`
	PolicyDefaults      *defaultsModel `tfsdk:"policy_defaults"`
}

func (d *DataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_deployment"
}

// PolicyAttributes are a policy document's sections as computed data source attributes, from
// the table of policy fields.
func PolicyAttributes() map[string]schema.Attribute {
	out := map[string]schema.Attribute{}
	for _, sec := range policyfield.Sections {
		attrs := map[string]schema.Attribute{}
		for _, f := range policyfield.In(sec.Name) {
			switch f.Kind {
			case policyfield.Integer:
				attrs[f.Path.Name()] = schema.Int64Attribute{MarkdownDescription: f.Description, Computed: true}
			case policyfield.Boolean:
				attrs[f.Path.Name()] = schema.BoolAttribute{MarkdownDescription: f.Description, Computed: true}
			case policyfield.StringSet:
				attrs[f.Path.Name()] = schema.SetAttribute{MarkdownDescription: f.Description, ElementType: types.StringType, Computed: true}
			}
		}
		out[string(sec.Name)] = schema.SingleNestedAttribute{MarkdownDescription: sec.Description, Computed: true, Attributes: attrs}
	}
	return out
}

func (d *DataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The deployment the provider talks to: its identifier, public URL, environment, server version, deletion grace period and policy defaults. Needs the `deployment:read` scope.",
		Attributes: map[string]schema.Attribute{
			"identifier":            schema.StringAttribute{MarkdownDescription: "The deployment identifier intake keys carry (`RENGA_DEPLOYMENT_ID`), or null.", Computed: true},
			"public_url":            schema.StringAttribute{MarkdownDescription: "The URL the deployment is reached at (`RENGA_PUBLIC_URL`).", Computed: true},
			"environment":           schema.StringAttribute{MarkdownDescription: "`production` or `development`.", Computed: true},
			"version":               schema.StringAttribute{MarkdownDescription: "The server's version.", Computed: true},
			"deletion_grace_period": schema.StringAttribute{MarkdownDescription: "How long a scheduled deletion waits before the purge (a Go duration, e.g. `720h0m0s`); destroying a `renga_organization` starts it.", Computed: true},
			"policy_defaults": schema.SingleNestedAttribute{
				MarkdownDescription: "The defaults an organization's policy overrides (`RENGA_POLICY_DEFAULTS` over the built-in ones). Every limit and entitlement has a value; a locked setting here is locked for every organization whose policy does not lock it.",
				Computed:            true,
				Attributes:          PolicyAttributes(),
			},
		},
	}
}

func (d *DataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.client = apiclient.FromProviderData(req.ProviderData, &resp.Diagnostics)
}

func (d *DataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	res, err := d.client.API.GetDeploymentWithResponse(ctx)
	if err != nil || res.StatusCode() != http.StatusOK || res.JSON200 == nil {
		apiclient.AddError(&resp.Diagnostics, "read the deployment", res, err)
		return
	}
	dep := res.JSON200
	// Show every section even when the deployment sets nothing in one.
	doc, diags := policydoc.FromAPI(dep.PolicyDefaults, policydoc.All)
	resp.Diagnostics.Append(diags...)
	m := model{
		Identifier:          types.StringPointerValue(dep.Identifier),
		PublicURL:           types.StringValue(dep.PublicUrl),
		Environment:         types.StringValue(string(dep.Environment)),
		Version:             types.StringValue(dep.Version),
		DeletionGracePeriod: types.StringValue(dep.DeletionGracePeriod),
		PolicyDefaults: &defaultsModel{Limits: doc.Section(policyfield.Limits), LockedSettings: doc.Section(policyfield.LockedSettings),
			Entitlements: doc.Section(policyfield.Entitlements)},
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
