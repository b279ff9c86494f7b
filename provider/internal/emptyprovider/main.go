// Command emptyprovider is a measuring instrument, not a product: a terraform-plugin-framework
// provider with nothing in it (no resources, data sources or attributes), served by the
// framework's own server. How long it takes to start and answer the plugin handshake is the least
// any framework provider costs Terraform each time it starts one (three times in a plan);
// bench/terraform_load_test.go measures it beside the Renga provider's start.
package main

import (
	"context"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

type empty struct{}

func (empty) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "renga"
}
func (empty) Schema(context.Context, provider.SchemaRequest, *provider.SchemaResponse)          {}
func (empty) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {}
func (empty) Resources(context.Context) []func() resource.Resource                              { return nil }
func (empty) DataSources(context.Context) []func() datasource.DataSource                        { return nil }

func main() {
	err := providerserver.Serve(context.Background(), func() provider.Provider { return empty{} },
		providerserver.ServeOpts{Address: "registry.terraform.io/renga/renga"})
	if err != nil {
		log.Fatal(err)
	}
}
