// Package organizationusage is the renga_organization_usage data source.
package organizationusage

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	openapi_types "github.com/oapi-codegen/runtime/types"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/provider/internal/apiclient"
	"renga.dev/renga/provider/internal/organization"
)

var (
	_ datasource.DataSource                     = (*DataSource)(nil)
	_ datasource.DataSourceWithConfigure        = (*DataSource)(nil)
	_ datasource.DataSourceWithConfigValidators = (*DataSource)(nil)
)

// MaxDays is the longest range the API answers (from and to inclusive).
const MaxDays = 401

var datePattern = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// DataSource is the renga_organization_usage data source.
type DataSource struct {
	client *apiclient.Client
}

// NewDataSource returns the renga_organization_usage data source.
func NewDataSource() datasource.DataSource { return &DataSource{} }

type dayModel struct {
	Day             types.String `tfsdk:"day"`
	IntakeRequests  types.Int64  `tfsdk:"intake_requests"`
	IntakeBytes     types.Int64  `tfsdk:"intake_bytes"`
	JobsCreated     types.Int64  `tfsdk:"jobs_created"`
	TerminalMinutes types.Int64  `tfsdk:"terminal_minutes"`
}

type totalsModel struct {
	IntakeRequests  types.Int64 `tfsdk:"intake_requests"`
	IntakeBytes     types.Int64 `tfsdk:"intake_bytes"`
	JobsCreated     types.Int64 `tfsdk:"jobs_created"`
	TerminalMinutes types.Int64 `tfsdk:"terminal_minutes"`
}

type model struct {
	OrganizationID types.String `tfsdk:"organization_id"`
	From           types.String `tfsdk:"from"`
	To             types.String `tfsdk:"to"`
	Days           []dayModel   `tfsdk:"days"`
	Totals         *totalsModel `tfsdk:"totals"`
}

func (d *DataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_organization_usage"
}

func (d *DataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	dateValidators := []validator.String{stringvalidator.RegexMatches(datePattern, "must be a date, YYYY-MM-DD")}
	counters := func(what string) map[string]schema.Attribute {
		return map[string]schema.Attribute{
			"intake_requests":  schema.Int64Attribute{MarkdownDescription: "Accepted intake requests " + what + " (counted once after deduplication).", Computed: true},
			"intake_bytes":     schema.Int64Attribute{MarkdownDescription: "Accepted intake bytes " + what + ".", Computed: true},
			"jobs_created":     schema.Int64Attribute{MarkdownDescription: "Jobs created " + what + ".", Computed: true},
			"terminal_minutes": schema.Int64Attribute{MarkdownDescription: "Connected terminal time " + what + ", in minutes (each day rounded up).", Computed: true},
		}
	}
	day := counters("that day")
	day["day"] = schema.StringAttribute{MarkdownDescription: "The UTC day, YYYY-MM-DD.", Computed: true}
	resp.Schema = schema.Schema{
		MarkdownDescription: "An organization's daily usage over a range of UTC days, zeros included, and its totals. Needs the `usage:read` scope.",
		Attributes: map[string]schema.Attribute{
			"organization_id": schema.StringAttribute{
				MarkdownDescription: "The organization's ID.",
				Required:            true,
				Validators:          organization.IDValidators(),
			},
			"from": schema.StringAttribute{
				MarkdownDescription: "First UTC day, inclusive (YYYY-MM-DD).",
				Required:            true,
				Validators:          dateValidators,
			},
			"to": schema.StringAttribute{
				MarkdownDescription: "Last UTC day, inclusive (YYYY-MM-DD); at most 400 days after `from`.",
				Required:            true,
				Validators:          dateValidators,
			},
			"days": schema.ListNestedAttribute{
				MarkdownDescription: "One row per UTC day from `from` to `to`.",
				Computed:            true,
				NestedObject:        schema.NestedAttributeObject{Attributes: day},
			},
			"totals": schema.SingleNestedAttribute{
				MarkdownDescription: "The sums of `days`.",
				Computed:            true,
				Attributes:          counters("over the range"),
			},
		},
	}
}

func (d *DataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.client = apiclient.FromProviderData(req.ProviderData, &resp.Diagnostics)
}

// ConfigValidators checks the range before any request.
func (d *DataSource) ConfigValidators(context.Context) []datasource.ConfigValidator {
	return []datasource.ConfigValidator{rangeValidator{}}
}

type rangeValidator struct{}

func (rangeValidator) Description(context.Context) string {
	return "to is not before from and at most 400 days after it"
}

func (v rangeValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (rangeValidator) ValidateDataSource(ctx context.Context, req datasource.ValidateConfigRequest, resp *datasource.ValidateConfigResponse) {
	var from, to types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("from"), &from)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("to"), &to)...)
	if resp.Diagnostics.HasError() || from.IsNull() || from.IsUnknown() || to.IsNull() || to.IsUnknown() {
		return
	}
	f, errF := time.Parse(time.DateOnly, from.ValueString())
	t, errT := time.Parse(time.DateOnly, to.ValueString())
	if errF != nil {
		resp.Diagnostics.AddAttributeError(path.Root("from"), "Invalid date", fmt.Sprintf("%q is not a date: %v", from.ValueString(), errF))
	}
	if errT != nil {
		resp.Diagnostics.AddAttributeError(path.Root("to"), "Invalid date", fmt.Sprintf("%q is not a date: %v", to.ValueString(), errT))
	}
	if errF != nil || errT != nil {
		return
	}
	switch days := int(t.Sub(f).Hours()/24) + 1; {
	case days < 1:
		resp.Diagnostics.AddAttributeError(path.Root("to"), "Invalid range", "to must not be before from.")
	case days > MaxDays:
		resp.Diagnostics.AddAttributeError(path.Root("to"), "Range too long", fmt.Sprintf("to must be at most 400 days after from (this range spans %d days).", days))
	}
}

func (d *DataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg model
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	from, errF := time.Parse(time.DateOnly, cfg.From.ValueString())
	to, errT := time.Parse(time.DateOnly, cfg.To.ValueString())
	if errF != nil || errT != nil {
		resp.Diagnostics.AddError("Invalid date range", "from and to must be dates, YYYY-MM-DD.")
		return
	}
	id := cfg.OrganizationID.ValueString()
	res, err := d.client.API.GetOrganizationUsageWithResponse(ctx, id, &client.GetOrganizationUsageParams{
		From: openapi_types.Date{Time: from}, To: openapi_types.Date{Time: to},
	})
	if err != nil || res.StatusCode() != http.StatusOK || res.JSON200 == nil {
		apiclient.AddError(&resp.Diagnostics, "read the usage of organization "+id, res, err)
		return
	}
	cfg.Days = make([]dayModel, 0, len(res.JSON200.Days))
	var t client.UsageTotals
	for _, u := range res.JSON200.Days {
		cfg.Days = append(cfg.Days, dayModel{
			Day:             types.StringValue(u.Day.Format(time.DateOnly)),
			IntakeRequests:  types.Int64Value(u.IntakeRequests),
			IntakeBytes:     types.Int64Value(u.IntakeBytes),
			JobsCreated:     types.Int64Value(u.JobsCreated),
			TerminalMinutes: types.Int64Value(u.TerminalMinutes),
		})
		t.IntakeRequests += u.IntakeRequests
		t.IntakeBytes += u.IntakeBytes
		t.JobsCreated += u.JobsCreated
		t.TerminalMinutes += u.TerminalMinutes
	}
	cfg.Totals = &totalsModel{
		IntakeRequests:  types.Int64Value(t.IntakeRequests),
		IntakeBytes:     types.Int64Value(t.IntakeBytes),
		JobsCreated:     types.Int64Value(t.JobsCreated),
		TerminalMinutes: types.Int64Value(t.TerminalMinutes),
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &cfg)...)
}
