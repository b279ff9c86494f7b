package domain

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

func TestStringToSign(t *testing.T) {
	hexSHA256 := func(b []byte) string {
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:])
	}
	const (
		emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" // SHA-256 of nothing
		abcSHA256   = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" // SHA-256 of "abc" (FIPS 180-2)
	)
	body := []byte(`{"observations":[{"id":"obs_1","value":1.0}]}`)
	tests := []struct {
		name                          string
		method, target, timestamp, id string
		body                          []byte
		want                          string
	}{
		{name: "known input", method: "POST", target: "/api/v1/agent/observations", timestamp: "1767225600", id: "ins_0123456789abcdefghjkmnpqrs",
			body: body,
			want: "renga-request-v1\nPOST\n/api/v1/agent/observations\n1767225600\nins_0123456789abcdefghjkmnpqrs\n" + hexSHA256(body)},
		{name: "abc", method: "PUT", target: "/api/v1/agent/jobs/job_1/result", timestamp: "1", id: "ins_1", body: []byte("abc"),
			want: "renga-request-v1\nPUT\n/api/v1/agent/jobs/job_1/result\n1\nins_1\n" + abcSHA256},
		{name: "no body", method: "GET", target: "/api/v1/agent/jobs?limit=10&after=job_1", timestamp: "1767225600", id: "ins_1", body: nil,
			want: "renga-request-v1\nGET\n/api/v1/agent/jobs?limit=10&after=job_1\n1767225600\nins_1\n" + emptySHA256},
		{name: "empty body", method: "GET", target: "/api/v1/agent/jobs", timestamp: "1767225600", id: "ins_1", body: []byte{},
			want: "renga-request-v1\nGET\n/api/v1/agent/jobs\n1767225600\nins_1\n" + emptySHA256},
		// The target is signed exactly as sent: no normalization.
		{name: "target as sent", method: "GET", target: "/api/v1/agent/../agent/jobs?b=2&a=%2F", timestamp: "1767225600", id: "ins_1",
			want: "renga-request-v1\nGET\n/api/v1/agent/../agent/jobs?b=2&a=%2F\n1767225600\nins_1\n" + emptySHA256},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := StringToSign(tt.method, tt.target, tt.timestamp, tt.id, tt.body)
			if got != tt.want {
				t.Errorf("StringToSign =\n%q\nwant\n%q", got, tt.want)
			}
			lines := strings.Split(got, "\n")
			if len(lines) != 6 || strings.HasSuffix(got, "\n") {
				t.Errorf("%d lines (trailing newline %v), want 6 and none", len(lines), strings.HasSuffix(got, "\n"))
			}
			if len(lines[5]) != 64 || strings.ToLower(lines[5]) != lines[5] {
				t.Errorf("digest line %q: want 64 lower-case hex digits", lines[5])
			}
		})
	}
	t.Run("the body's bytes are signed, not its meaning", func(t *testing.T) {
		a := StringToSign("POST", "/x", "1", "ins_1", []byte(`{"a":1}`))
		b := StringToSign("POST", "/x", "1", "ins_1", []byte(`{"a": 1}`))
		if a == b {
			t.Error("two bodies with the same JSON value sign the same string")
		}
	})
}

func TestHasScope(t *testing.T) {
	tests := []struct {
		name    string
		granted []string
		scope   string
		want    bool
	}{
		{"granted read", []string{"organizations:read"}, "organizations:read", true},
		{"granted write", []string{"organizations:write"}, "organizations:write", true},
		{"write grants its read", []string{"organizations:write"}, "organizations:read", true},
		{"read does not grant write", []string{"organizations:read"}, "organizations:write", false},
		{"write grants no other read", []string{"organizations:write"}, "policies:read", false},
		{"write grants no other write", []string{"organizations:write"}, "policies:write", false},
		{"read grants no other read", []string{"organizations:read"}, "audit:read", false},
		{"among others", []string{"usage:read", "support:write", "audit:read"}, "support:read", true},
		{"among others, not there", []string{"usage:read", "support:write", "audit:read"}, "transfers:read", false},
		{"nothing granted", nil, "deployment:read", false},
		{"empty grant", []string{}, "organizations:read", false},
		{"empty scope", []string{"organizations:write"}, "", false},
		{"authenticated is not a granted scope", []string{"organizations:write"}, ScopeAuthenticated, false},
		{"case matters", []string{"organizations:write"}, "Organizations:read", false},
		{"prefix of a scope", []string{"organizations:write"}, "organizations", false},
		{"a read-only scope granted", []string{"audit:read"}, "audit:read", true},
		{"write of a read-only scope", []string{"audit:read"}, "audit:write", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := HasScope(tt.granted, tt.scope); got != tt.want {
				t.Errorf("HasScope(%v, %q) = %v, want %v", tt.granted, tt.scope, got, tt.want)
			}
		})
	}
	t.Run("every write scope grants its read scope", func(t *testing.T) {
		for _, s := range Scopes {
			base, ok := strings.CutSuffix(s, ":write")
			if !ok {
				continue
			}
			if !HasScope([]string{s}, base+":read") {
				t.Errorf("%s does not grant %s:read", s, base)
			}
			if HasScope([]string{base + ":read"}, s) {
				t.Errorf("%s:read grants %s", base, s)
			}
		}
	})
}
