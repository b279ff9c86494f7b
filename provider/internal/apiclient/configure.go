package apiclient

import (
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
)

// FromProviderData is what every resource's and data source's Configure does with the
// provider's data: nil before the provider is configured, else the client.
func FromProviderData(data any, diags *diag.Diagnostics) *Client {
	if data == nil {
		return nil
	}
	c, ok := data.(*Client)
	if !ok {
		diags.AddError("Unexpected provider data", fmt.Sprintf("Expected *apiclient.Client, got %T. This is a bug in the provider.", data))
		return nil
	}
	return c
}
