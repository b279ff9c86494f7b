package domain

import (
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// TestRenumberParams: a statement's parameters move by the offset, and nothing else changes.
func TestRenumberParams(t *testing.T) {
	for in, want := range map[string]string{
		"":                             "",
		"SELECT 1":                     "SELECT 1",
		"VALUES ($1, $2, $10)":         "VALUES ($10, $11, $19)",
		"WHERE $18 AND id = $9":        "WHERE $27 AND id = $18",
		"SELECT $1::text || $1 || 'x'": "SELECT $10::text || $10 || 'x'",
		"($9)":                         "($18)",
	} {
		if got := renumberParams(in, 9); got != want {
			t.Errorf("renumberParams(%q, 9) = %q, want %q", in, got, want)
		}
	}
}

// TestStoreResultAndAuditParams: the merged statement at a keyed write's end takes the stored
// result's nine parameters, then the audit statement's, each used: as many as FinishWrite sends.
func TestStoreResultAndAuditParams(t *testing.T) {
	seen := map[int]bool{}
	for _, m := range regexp.MustCompile(`\$(\d+)`).FindAllStringSubmatch(storeResultAndAuditSQL, -1) {
		n, _ := strconv.Atoi(m[1])
		seen[n] = true
	}
	_, audit := AuditStatement(AuditEvent{})
	var got []int
	for n := range seen {
		got = append(got, n)
	}
	slices.Sort(got)
	if len(got) != 9+len(audit) || got[0] != 1 || got[len(got)-1] != 9+len(audit) {
		t.Errorf("the merged statement's parameters are %v, want 1 to %d", got, 9+len(audit))
	}
}
