// Command terraform-provider-renga is the Renga Terraform provider.
package main

import (
	"flag"
	"log"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6/tf6server"

	"renga.dev/renga/provider/internal/process"
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
	process.SetUp()
	// providerserver.Serve with the provider's own server (the framework's, wrapped).
	var opts []tf6server.ServeOpt
	if debug {
		opts = append(opts, tf6server.WithManagedDebug())
	}
	err := tf6server.Serve(Address, provider.Server(version), opts...)
	if err != nil {
		log.Fatal(err)
	}
}
