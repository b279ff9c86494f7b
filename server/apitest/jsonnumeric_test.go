package apitest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// TestNumbersFitNumericAsPostgreSQL: domain.NumbersFitNumeric refuses a JSON document exactly
// when PostgreSQL's jsonb does (value overflows numeric format), on each side of every limit
// (an exponent of INT_MAX/2, 16383 digits of scale, 131072 digits before the point, zero's
// weight, trailing zeroes, digits inside strings) and on random numbers near them.
//
// Fails when: the check refuses what PostgreSQL takes (a batch refused that it would store), or
// passes what it refuses at a limit (the group's statement fails for one batch).
func TestNumbersFitNumericAsPostgreSQL(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	zeros := func(n int) string { return strings.Repeat("0", n) }
	docs := []string{
		`{"n": 0}`, `{"n": -0}`, `{"n": -1.5}`, `{"n": 1e400}`, `{"n": 1e-400}`, `[1, 2.5, -3e7, true, null]`,
		`{"n": 1e131071}`, `{"n": 1e131072}`, `{"n": 1E+131071}`, `{"n": 1E+131072}`, `{"n": -1e131072}`,
		`{"n": 9.999e131071}`, `{"n": 10e131070}`, `{"n": 10e131071}`, `{"n": 0.1e131072}`, `{"n": 0.1e131073}`,
		`{"n": 123e131069}`, `{"n": 123e131070}`, `{"n": 0.00001e131076}`, `{"n": 0.00001e131077}`,
		`{"n": 1` + zeros(131071) + `}`, `{"n": 1` + zeros(131072) + `}`, `{"n": ` + zeros(1) + `.` + zeros(131080) + `1e131080}`,
		`{"n": 0.` + zeros(16382) + `1}`, `{"n": 0.` + zeros(16383) + `1}`, `{"n": 1.` + zeros(16383) + `}`, `{"n": 1.` + zeros(16384) + `}`,
		`{"n": 1e-16383}`, `{"n": 1e-16384}`, `{"n": 1.5e-16382}`, `{"n": 1.50e-16382}`, `{"n": 0e-16383}`, `{"n": 0e-16384}`,
		`{"n": 0.0e-16383}`, `{"n": 1e-131072}`, `{"n": 1e-131073}`, `{"n": 1.` + zeros(16383) + `e1}`,
		`{"n": 0e1073741822}`, `{"n": 0e1073741823}`, `{"n": 0e-1073741822}`, `{"n": 0e-1073741823}`,
		`{"n": 0e99999999999999999999}`, `{"n": 1e00000000000000000001}`, `{"n": 5e1073741822}`,
		`{"s": "1e999999", "t": "\"1e999999", "1e999999": 1}`, `{"a": [1, {"b": 1e131072}]}`, `{"a": [1, {"b": "1e131072"}]}`,
		// A whole document that is one number; backslashes before a closing quote.
		`1e131071`, `1e131072`, `-0`, `{"a": "\\", "n": 1e131072}`, `{"a\\": 1e131072}`, `["\\\"1e131072"]`, `["x",1e131072]`,
		`-1e131071`, `-9.999e131071`, `{"n": 0.` + zeros(10) + `1e131082}`, `{"n": 0.` + zeros(10) + `1e131083}`,
		// Many digits after the point, pulled back by the exponent; zeroes at the exponent's limit.
		`{"n": 1.` + zeros(20000) + `e3617}`, `{"n": 1.` + zeros(20000) + `e3616}`, `{"n": 0.000e1073741822}`,
		`{"n": 0e+1073741824}`, `{"n": 0e01073741824}`, `{"n": 1E+0131071}`, `{"n": 1e-0000016383}`,
		`{"n": 0e-1073741823}`, `{"n": 0e-1073741824}`, `{"n": 1e1073741823}`, `{"n": 1e4294967301}`, `{"n": 0e4294967301}`,
		`{"n": 0e10737418230}`, `{"n": 0e1073741822}`,
		// Digits inside strings past their first character; numbers that end the document.
		`{"s": "x1e999999"}`, `{"s": "ab 1e131072 cd"}`, `"1e131072"`, `1.5`, `-0.25`, `0`, `9`, `-9.5e-3`,
	}
	// PostgreSQL 15 refuses an exponent of exactly INT_MAX/2 (16 takes it on a zero):
	// NumbersFitNumeric passes such a zero, and PostgreSQL 15 refuses it itself.
	var version int
	if err := env.Pool.QueryRow(context.Background(), `SELECT current_setting('server_version_num')::int`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	refusedBy15Only := map[string]bool{}
	for _, d := range []string{`{"n": 0e1073741823}`, `{"n": 0e+1073741823}`, `{"n": -0.0E+1073741823}`} {
		docs = append(docs, d)
		refusedBy15Only[d] = version < 160000
	}
	// Random numbers near the limits: digits before and after the point, and an exponent, each
	// drawn around where a limit falls.
	r := rand.New(rand.NewPCG(1, 2))
	near := func(limit int) int { return limit + r.IntN(9) - 4 }
	for range 200 {
		intPart := "0"
		if r.IntN(2) == 0 {
			intPart = fmt.Sprint(1+r.IntN(9)) + zeros(r.IntN(6))
		}
		frac := ""
		if r.IntN(2) == 0 {
			frac = "." + zeros(r.IntN(4)) + fmt.Sprint(r.IntN(100)) + zeros(r.IntN(3))
		}
		exp := ""
		switch r.IntN(4) {
		case 0:
			exp = fmt.Sprintf("e%d", near(131071))
		case 1:
			exp = fmt.Sprintf("e-%d", near(16383))
		case 2:
			if e := near(1073741823); e != 1073741823 { // that one is refusedBy15Only's, on a zero
				exp = fmt.Sprintf("e%d", e)
			}
		}
		docs = append(docs, `{"n": `+intPart+frac+exp+`}`)
	}
	// Each statement its own transaction, so that one refusal does not abort the others.
	conn, err := env.Pool.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	refused := 0
	for _, d := range docs {
		var ok bool
		err := conn.QueryRow(context.Background(), `SELECT $1::text::jsonb IS NOT NULL`, d).Scan(&ok)
		var pgErr *pgconn.PgError
		takes := err == nil
		if !takes && (!errors.As(err, &pgErr) || pgErr.Code != pgerrcode.NumericValueOutOfRange) {
			t.Fatalf("%.80s: %v", d, err)
		}
		if !takes {
			refused++
		}
		if got := domain.NumbersFitNumeric([]byte(d)); got != takes && (!got || !refusedBy15Only[d]) {
			t.Errorf("%.80s…: NumbersFitNumeric %v, PostgreSQL takes it: %v", d, got, takes)
		}
	}
	if refused < len(docs)/4 || refused > len(docs)*3/4 {
		t.Errorf("PostgreSQL refused %d of %d documents: the cases are not around its limits", refused, len(docs))
	}
}
