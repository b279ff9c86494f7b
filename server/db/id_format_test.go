package db

import (
	"bytes"
	"testing"
)

// TestFormatID: FormatID writes a key as NewID writes the same bits, sorting as the bytes do,
// and ParseID reads it back; anything not of the shape is refused.
func TestFormatID(t *testing.T) {
	var prev [16]byte
	for i := range 1000 {
		id := NewID("obs")
		key, ok := ParseID("obs", id)
		if !ok || FormatID("obs", key) != id {
			t.Fatalf("%q: read back %v as %q", id, ok, FormatID("obs", key))
		}
		if i > 0 && bytes.Compare(key[:], prev[:]) <= 0 {
			t.Fatalf("%q's bytes do not sort after the previous ID's", id)
		}
		prev = key
	}
	top := [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	if id := FormatID("x", top); id != "x_7zzzzzzzzzzzzzzzzzzzzzzzzz" {
		t.Errorf("the largest key: %q", id)
	}
	for _, bad := range []string{"", "obs_", "job_01jc3x9m1h7r4v5n8q2w6e0t9y", "obs_81jc3x9m1h7r4v5n8q2w6e0t9y",
		"obs_01jc3x9m1h7r4v5n8q2w6e0t9", "obs_01jc3x9m1h7r4v5n8q2w6e0t9yy", "obs_01jc3x9m1h7r4v5n8q2w6e0t9u", "obs_01JC3X9M1H7R4V5N8Q2W6E0T9Y", "obs_1"} {
		if _, ok := ParseID("obs", bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
