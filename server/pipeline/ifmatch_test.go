package pipeline

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"renga.dev/renga/gen/api"
)

func TestParseIfMatch(t *testing.T) {
	const required = http.StatusPreconditionRequired
	tests := []struct {
		name    string
		values  []string // nil: no If-Match header at all
		want    int64
		status  int // 0: no problem
		errCode api.ErrorCode
	}{
		{name: "missing", values: nil, want: 0, status: required, errCode: api.ErrorCodePreconditionRequired},
		{name: "empty", values: []string{""}, want: 0, status: required, errCode: api.ErrorCodePreconditionRequired},
		{name: "only spaces", values: []string{"   "}, want: 0, status: required, errCode: api.ErrorCodePreconditionRequired},
		{name: "star", values: []string{"*"}, want: 0, status: required, errCode: api.ErrorCodePreconditionRequired},
		{name: "star with spaces", values: []string{" * "}, want: 0, status: required, errCode: api.ErrorCodePreconditionRequired},
		{name: "strong tag", values: []string{`"3"`}, want: 3},
		{name: "strong tag with spaces", values: []string{` "3" `}, want: 3},
		{name: "one", values: []string{`"1"`}, want: 1},
		{name: "max int64", values: []string{`"9223372036854775807"`}, want: 9223372036854775807},
		{name: "weak tag", values: []string{`W/"3"`}, want: -1},
		{name: "zero", values: []string{`"0"`}, want: -1},
		{name: "negative", values: []string{`"-1"`}, want: -1},
		{name: "not a number", values: []string{`"abc"`}, want: -1},
		{name: "unquoted", values: []string{`3`}, want: -1},
		{name: "empty quotes", values: []string{`""`}, want: -1},
		{name: "one quote", values: []string{`"`}, want: -1},
		{name: "opening quote only", values: []string{`"3`}, want: -1},
		{name: "overflow", values: []string{`"9223372036854775808"`}, want: -1},
		{name: "huge overflow", values: []string{`"99999999999999999999999999"`}, want: -1},
		{name: "space inside quotes", values: []string{`" 3"`}, want: -1},
		{name: "decimal", values: []string{`"3.0"`}, want: -1},
		{name: "list of tags", values: []string{`"3", "4"`}, want: -1},
		// Only the first header line is read: a second line is not a second chance.
		{name: "two header lines", values: []string{`"3"`, `"4"`}, want: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPut, "/api/v1/operator/x", nil)
			for _, v := range tt.values {
				r.Header.Add("If-Match", v)
			}
			got, pe := parseIfMatch(r)
			if got != tt.want {
				t.Errorf("version = %d, want %d", got, tt.want)
			}
			if tt.status == 0 {
				if pe != nil {
					t.Fatalf("problem = %v, want none", pe)
				}
				return
			}
			if pe == nil {
				t.Fatalf("no problem, want %d %s", tt.status, tt.errCode)
			}
			if pe.Status != tt.status || pe.Code != tt.errCode {
				t.Errorf("problem = %d %s, want %d %s", pe.Status, pe.Code, tt.status, tt.errCode)
			}
			if pe.Detail == "" {
				t.Error("problem has no detail")
			}
		})
	}
}

// An entity tag is an opaque string compared character by character (RFC 9110 §8.8.3.2): the
// ETag of version 3 is "3", so "+3" and "03" are other tags, which can never match.
func TestParseIfMatchOtherSpellingsOfTheVersion(t *testing.T) {
	for _, v := range []string{`"+3"`, `"03"`, `"003"`} {
		r := httptest.NewRequest(http.MethodPut, "/api/v1/operator/x", nil)
		r.Header.Set("If-Match", v)
		if got, pe := parseIfMatch(r); got != -1 || pe != nil {
			t.Errorf("If-Match %s: version %d, problem %v; want -1 and no problem", v, got, pe)
		}
	}
}
