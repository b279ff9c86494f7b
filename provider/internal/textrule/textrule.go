// Package textrule is openapi.yaml's rule for names people read (display names, emails,
// issuers, client IDs): no control, invisible or direction-changing character. The provider
// checks it while planning, so that a configuration the server would refuse fails at plan time.
package textrule

import (
	"regexp"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

// visible is openapi.yaml's pattern (DisplayName and every name people read) in Go's syntax:
// \x{...} where the spec writes \u.... TestSameAsTheSpec holds the two to the same set.
var visible = regexp.MustCompile(`^[^\x00-\x1F\x7F-\x9F\x{00AD}\x{034F}\x{061C}\x{115F}\x{1160}\x{180E}\x{200B}-\x{200F}\x{2028}-\x{202E}\x{2060}-\x{206F}\x{3164}\x{FEFF}\x{FFA0}\x{FFF9}-\x{FFFB}]+$`)

// Visible is the validator of a name people read.
func Visible() validator.String {
	return stringvalidator.RegexMatches(visible, "must not contain control, invisible or direction-changing characters")
}
