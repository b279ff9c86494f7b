// Package textrule is openapi.yaml's rule for names people read (display names, emails,
// issuers, client IDs) as a plan-time validator: no control, invisible or direction-changing
// character. The characters are api/textrule's, held to the spec's pattern by its own test, so a
// configuration the server would refuse fails while planning.
package textrule

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"renga.dev/renga/api/textrule"
)

// Visible is the validator of a name people read.
func Visible() validator.String { return visible{} }

type visible struct{}

const rule = "must not contain control, invisible or direction-changing characters"

func (visible) Description(context.Context) string         { return rule }
func (visible) MarkdownDescription(context.Context) string { return rule }

func (visible) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	v := req.ConfigValue.ValueString()
	if i := strings.IndexFunc(v, textrule.Hidden); i >= 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid Attribute Value",
			fmt.Sprintf("Attribute %s %s; %q holds %s.", req.Path, rule, textrule.Escaped(v), textrule.Escaped(string([]rune(v[i:])[0]))))
	}
}
