package textrule

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// TestVisible: a name with a hidden character is refused, naming the character as its escape;
// ordinary non-ASCII names, null and unknown values pass.
// Fails when: the validator lets a right-to-left override through, or refuses accents or CJK.
func TestVisible(t *testing.T) {
	for _, tc := range []struct {
		value types.String
		want  string // "" passes
	}{
		{types.StringValue("Café Zürich"), ""},
		{types.StringValue("東京 本社 🚀"), ""},
		{types.StringNull(), ""},
		{types.StringUnknown(), ""},
		{types.StringValue("Acme\u202eCorp"), `holds \u202E`},
		{types.StringValue("olivia\u200b@example.com"), `holds \u200B`},
		{types.StringValue("a\u0085b"), `holds \u0085`},
	} {
		var resp validator.StringResponse
		Visible().ValidateString(context.Background(), validator.StringRequest{Path: path.Root("display_name"), ConfigValue: tc.value}, &resp)
		got := ""
		if resp.Diagnostics.HasError() {
			got = resp.Diagnostics.Errors()[0].Detail()
		}
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.value, got, tc.want)
		}
	}
}
