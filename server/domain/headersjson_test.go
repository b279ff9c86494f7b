package domain

import (
	"bytes"
	"encoding/json"
	"testing"
)

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
