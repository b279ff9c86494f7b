package domain

import (
	"encoding/json"
	"maps"
	"testing"
)

// TestHeadersJSON: a stored result's headers are a JSON object that reads back as the same
// headers; none is an empty object, not null.
func TestHeadersJSON(t *testing.T) {
	if got := string(headersJSON(nil)); got != "{}" {
		t.Errorf("headersJSON(nil) = %s, want {}", got)
	}
	for _, h := range []map[string]string{
		{},
		{"Content-Type": "application/json"},
		{"Content-Type": "application/problem+json", "Location": "/api/v1/operator/organizations/org_1", "ETag": `"1"`,
			"Idempotency-Expires": "2026-12-03T00:00:00Z", "X-Odd": "<&>\u2028\x01"},
	} {
		var back map[string]string
		if err := json.Unmarshal(headersJSON(h), &back); err != nil || !maps.Equal(back, h) {
			t.Errorf("headersJSON(%v) reads back as %v, %v", h, back, err)
		}
	}
}
