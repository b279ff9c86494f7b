package domain

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestAppendJSONString: a string is escaped as encoding/json escapes it, for every byte and the
// runes it treats apart.
func TestAppendJSONString(t *testing.T) {
	inputs := []string{"", "plain", "<a href=\"x\">&</a>", "\u2028\u2029", "é😀", "\xff", "\xed\xa0\x80", "a\x00b\x1fc\x7f", "\\/"}
	for b := range 256 {
		inputs = append(inputs, string([]byte{byte(b)}), "x"+string([]byte{byte(b)})+"y")
	}
	for _, s := range inputs {
		escapedAsMarshal(t, s)
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range []string{"", "a\"b", "<>&", "\u2028", "\xff\xfe", "\x00\x1f", "é"} {
		f.Add(s)
	}
	f.Fuzz(escapedAsMarshal)
}

// escapedAsMarshal fails t unless AppendJSONString writes s as json.Marshal does.
func escapedAsMarshal(t *testing.T, s string) {
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendJSONString(nil, s); !bytes.Equal(got, want) {
		t.Errorf("AppendJSONString(%q) = %s, want %s", s, got, want)
	}
}

// TestHeadersJSON: a stored result's headers are written as encoding/json writes the map.
func TestHeadersJSON(t *testing.T) {
	for _, h := range []map[string]string{
		{},
		{"Content-Type": "application/json"},
		{"Content-Type": "application/problem+json", "Location": "/api/v1/operator/organizations/org_1", "ETag": `"1"`,
			"Idempotency-Expires": "2026-12-03T00:00:00Z", "X-Odd": "<&>\u2028\x01\xff"},
	} {
		want, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		if got := headersJSON(h); !bytes.Equal(got, want) {
			t.Errorf("headersJSON(%v) = %s, want %s", h, got, want)
		}
	}
}
