package organization

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/apiclient"
)

var (
	_ datasource.DataSource              = (*DataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*DataSource)(nil)
)

// DataSource is the renga_organization data source.
type DataSource struct {
	client *apiclient.Client
}

// NewDataSource returns the renga_organization data source.
func NewDataSource() datasource.DataSource { return &DataSource{} }

// Model is an organization as the data sources show it.
type Model struct {
	ID              types.String `tfsdk:"id"`
	Slug            types.String `tfsdk:"slug"`
	DisplayName     types.String `tfsdk:"display_name"`
	State           types.String `tfsdk:"state"`
	SuspendedReason types.String `tfsdk:"suspended_reason"`
	PurgeAfter      types.String `tfsdk:"purge_after"`
	Version         types.Int64  `tfsdk:"version"`
	CreatedAt       types.String `tfsdk:"created_at"`
	UpdatedAt       types.String `tfsdk:"updated_at"`
}

// ToDataModel converts an organization for the data sources.
func ToDataModel(o client.Organization) Model {
	m := Model{
		ID:              types.StringValue(o.Id),
		Slug:            types.StringValue(o.Slug),
		DisplayName:     types.StringValue(o.DisplayName),
		State:           types.StringValue(string(o.State)),
		SuspendedReason: types.StringPointerValue(o.SuspendedReason),
		PurgeAfter:      types.StringNull(),
		Version:         types.Int64Value(o.Version),
		CreatedAt:       types.StringValue(o.CreatedAt.UTC().Format(time.RFC3339)),
		UpdatedAt:       types.StringValue(o.UpdatedAt.UTC().Format(time.RFC3339)),
	}
	if o.PurgeAfter != nil {
		m.PurgeAfter = types.StringValue(o.PurgeAfter.UTC().Format(time.RFC3339))
	}
	return m
}

// ComputedAttributes are the attributes of an organization every data source shows, all
// computed (the singular data source makes id and slug optional).
func ComputedAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"id":               schema.StringAttribute{MarkdownDescription: "The organization's ID, `org_...`.", Computed: true},
		"slug":             schema.StringAttribute{MarkdownDescription: "Unique, immutable short name.", Computed: true},
		"display_name":     schema.StringAttribute{MarkdownDescription: "Human-readable name.", Computed: true},
		"state":            schema.StringAttribute{MarkdownDescription: "`active`, `suspended`, `deletion_pending`, `purging` or `moved`.", Computed: true},
		"suspended_reason": schema.StringAttribute{MarkdownDescription: "Why it is suspended (kept while its deletion is pending), or null.", Computed: true},
		"purge_after":      schema.StringAttribute{MarkdownDescription: "When `deletion_pending`, the time (RFC 3339) after which the purge may start; otherwise null.", Computed: true},
		"version":          schema.Int64Attribute{MarkdownDescription: "The organization's version.", Computed: true},
		"created_at":       schema.StringAttribute{MarkdownDescription: "Creation time, RFC 3339 UTC.", Computed: true},
		"updated_at":       schema.StringAttribute{MarkdownDescription: "Last change, RFC 3339 UTC.", Computed: true},
	}
}

func (d *DataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_organization"
}

func (d *DataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	attrs := ComputedAttributes()
	attrs["id"] = schema.StringAttribute{
		MarkdownDescription: "The organization's ID, `org_...`. Exactly one of `id` and `slug` must be set.",
		Optional:            true,
		Computed:            true,
		Validators: append(IDValidators(),
			stringvalidator.ExactlyOneOf(path.MatchRoot("id"), path.MatchRoot("slug"))),
	}
	attrs["slug"] = schema.StringAttribute{
		MarkdownDescription: "The organization's slug. Exactly one of `id` and `slug` must be set.",
		Optional:            true,
		Computed:            true,
		Validators:          append([]validator.String{}, SlugValidators()...),
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "One organization of the deployment, looked up by ID or by slug, in any state (including `deletion_pending`).",
		Attributes:          attrs,
	}
}

func (d *DataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.client = apiclient.FromProviderData(req.ProviderData, &resp.Diagnostics)
}

func (d *DataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg Model
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var org *client.Organization
	if id := cfg.ID.ValueString(); id != "" {
		res, err := d.client.API.GetOrganizationWithResponse(ctx, id)
		if err != nil || res.StatusCode() != http.StatusOK || res.JSON200 == nil {
			if err == nil && res.StatusCode() == http.StatusNotFound {
				resp.Diagnostics.AddAttributeError(path.Root("id"), "No such organization", fmt.Sprintf("The deployment has no organization %s.", id))
				return
			}
			apiclient.AddError(&resp.Diagnostics, "read organization "+id, res, err)
			return
		}
		org = res.JSON200
	} else {
		slug := cfg.Slug.ValueString()
		res, err := d.client.API.ListOrganizationsWithResponse(ctx, &client.ListOrganizationsParams{Slug: &slug})
		if err != nil || res.StatusCode() != http.StatusOK || res.JSON200 == nil {
			apiclient.AddError(&resp.Diagnostics, fmt.Sprintf("look up organization %q", slug), res, err)
			return
		}
		if len(res.JSON200.Items) == 0 {
			resp.Diagnostics.AddAttributeError(path.Root("slug"), "No such organization", fmt.Sprintf("The deployment has no organization with slug %q.", slug))
			return
		}
		org = &res.JSON200.Items[0]
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, ToDataModel(*org))...)
}
