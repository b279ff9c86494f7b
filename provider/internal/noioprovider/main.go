// Command noioprovider is a measuring instrument, not a product: the Renga provider's two
// resources of examples/scale (renga_organization, renga_organization_policy) with their real
// schemas, served by the framework's server as the provider's binary serves them, but whose Read
// keeps the state it is given and whose provider configures without a word to any deployment. A refresh-only plan with it is what
// Terraform costs with a provider that does no I/O at all: process starts, the plugin protocol,
// the framework and Terraform's own walk. bench/terraform_load_test.go measures it beside the
// real provider and Terraform's floor (terraform_data), so the share of the plan that the API
// and the provider's client could ever win back is measured, not guessed.
package main

import (
	"context"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"

	"renga.dev/renga/provider/internal/apiclient"
	"renga.dev/renga/provider/internal/organization"
	"renga.dev/renga/provider/internal/organizationpolicy"
	rengaprovider "renga.dev/renga/provider/internal/provider"
)

func main() {
	rengaprovider.QuietSDKLogs() // as the provider's binary does
	// Never dialled: Read below makes no call.
	c, err := apiclient.New(apiclient.Config{URL: "http://127.0.0.1:1"})
	if err != nil {
		log.Fatal(err)
	}
	p := &noIO{client: c}
	err = providerserver.Serve(context.Background(), func() provider.Provider { return p },
		providerserver.ServeOpts{Address: "registry.terraform.io/renga/renga"})
	if err != nil {
		log.Fatal(err)
	}
}

// resources are the provider's resources: examples/scale's two, reading nothing.
var resources = []func() resource.Resource{
	func() resource.Resource { return organizationNoRead{&organization.Resource{}} },
	func() resource.Resource { return policyNoRead{&organizationpolicy.Resource{}} },
}

// organizationNoRead is renga_organization (every method the real one has) with a Read that
// keeps the state.
type organizationNoRead struct{ *organization.Resource }

func (organizationNoRead) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

// policyNoRead is renga_organization_policy with a Read that keeps the state.
type policyNoRead struct{ *organizationpolicy.Resource }

func (policyNoRead) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

// noIO is a provider of type renga with the real provider's arguments, configured without a
// call.
type noIO struct {
	client *apiclient.Client
}

func (p *noIO) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "renga"
}

func (p *noIO) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"url":   schema.StringAttribute{Optional: true},
		"token": schema.StringAttribute{Optional: true, Sensitive: true},
	}}
}

func (p *noIO) Configure(_ context.Context, _ provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	resp.ResourceData = p.client
}

func (p *noIO) Resources(context.Context) []func() resource.Resource { return resources }

func (p *noIO) DataSources(context.Context) []func() datasource.DataSource { return nil }
