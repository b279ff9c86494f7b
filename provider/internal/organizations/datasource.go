// Package organizations is the renga_organizations data source.
package organizations

import (
	"context"
	"net/http"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/apiclient"
	"renga.dev/renga/provider/internal/organization"
)

var (
	_ datasource.DataSource              = (*DataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*DataSource)(nil)
)

// DataSource is the renga_organizations data source.
type DataSource struct {
	client *apiclient.Client
}

// NewDataSource returns the renga_organizations data source.
func NewDataSource() datasource.DataSource { return &DataSource{} }

type model struct {
	State         types.String         `tfsdk:"state"`
	Organizations []organization.Model `tfsdk:"organizations"`
}

func (d *DataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_organizations"
}

func (d *DataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	states := []string{
		string(client.OrganizationStateActive), string(client.OrganizationStateSuspended),
		string(client.OrganizationStateDeletionPending), string(client.OrganizationStatePurging),
		string(client.OrganizationStateMoved),
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Every organization of the deployment, oldest first, optionally only those in one state. Reads all pages.",
		Attributes: map[string]schema.Attribute{
			"state": schema.StringAttribute{
				MarkdownDescription: "Only organizations in this state: `active`, `suspended`, `deletion_pending`, `purging` or `moved`. Unset: all.",
				Optional:            true,
				Validators:          []validator.String{stringvalidator.OneOf(states...)},
			},
			"organizations": schema.ListNestedAttribute{
				MarkdownDescription: "The organizations, oldest first.",
				Computed:            true,
				NestedObject:        schema.NestedAttributeObject{Attributes: organization.ComputedAttributes()},
			},
		},
	}
}

func (d *DataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.client = apiclient.FromProviderData(req.ProviderData, &resp.Diagnostics)
}

func (d *DataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg model
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	params := client.ListOrganizationsParams{PageSize: new(500)}
	if !cfg.State.IsNull() {
		params.State = new(client.OrganizationState(cfg.State.ValueString()))
	}
	cfg.Organizations = []organization.Model{}
	for {
		res, err := d.client.API.ListOrganizationsWithResponse(ctx, &params)
		if err != nil || res.StatusCode() != http.StatusOK || res.JSON200 == nil {
			apiclient.AddError(&resp.Diagnostics, "list organizations", res, err)
			return
		}
		for _, o := range res.JSON200.Items {
			cfg.Organizations = append(cfg.Organizations, organization.ToDataModel(o))
		}
		if res.JSON200.NextPageToken == nil {
			break
		}
		params.PageToken = res.JSON200.NextPageToken
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &cfg)...)
}
