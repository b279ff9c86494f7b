package textrule

import (
	"testing"

	"renga.dev/renga/gen/api"
)

// TestSameAsTheSpec: the provider refuses exactly the characters openapi.yaml's pattern for
// names people read refuses, over all of Unicode.
// Fails when: either changes alone ("U+202E: the spec refuses it true, the provider false").
func TestSameAsTheSpec(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	name := spec.Components.Schemas["DisplayName"].Value
	for r := rune(0); r <= 0x10FFFF; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		s := "a" + string(r) + "b"
		if spec, provider := name.VisitJSON(s) != nil, !visible.MatchString(s); spec != provider {
			t.Errorf("U+%04X: the spec refuses it %v, the provider %v", r, spec, provider)
		}
	}
}
