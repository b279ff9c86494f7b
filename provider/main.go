// Command terraform-provider-renga is the Renga Terraform provider.
package main

import (
	"context"
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"

	"renga.dev/renga/provider/internal/provider"
)

// Address is the provider's source address (`source = "renga/renga"`).
const Address = "registry.terraform.io/renga/renga"

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

func main() {
	var debug bool
	flag.BoolVar(&debug, "debug", false, "run the provider for a debugger (prints TF_REATTACH_PROVIDERS)")
	flag.Parse()
	provider.QuietSDKLogs()
	err := providerserver.Serve(context.Background(), provider.New(version), providerserver.ServeOpts{
		Address: Address,
		Debug:   debug,
	})
	if err != nil {
		log.Fatal(err)
	}
}
