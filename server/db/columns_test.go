package db_test

import (
	"context"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/servertest"
)

// columnsRow is one value of each type db.Columns reads, in the order it reads them.
type columnsRow struct {
	Text        string
	TextOrNull  *string
	Int8        int64
	Bytea       []byte
	Time        time.Time
	TimeOrNull  *time.Time
	TextArray   []string
	PrefixArray []netip.Prefix
}

func (r *columnsRow) dests() []any {
	return []any{&r.Text, &r.TextOrNull, &r.Int8, &r.Bytea, &r.Time, &r.TimeOrNull, &r.TextArray, &r.PrefixArray}
}

func readColumns(c *db.Columns) columnsRow {
	return columnsRow{Text: c.Text(), TextOrNull: c.TextOrNull(), Int8: c.Int8(), Bytea: c.Bytea(),
		Time: c.Time(), TimeOrNull: c.TimeOrNull(), TextArray: c.TextArray(), PrefixArray: c.PrefixArray()}
}

// TestColumnsDecodeAsPgxScans reads rows with db.Columns and with pgx's Scan: where Columns
// reads a row, it reads what Scan reads; where it does not (a value of another type, NULL where
// the type has none, an infinite time, a NULL element), it says so, and the caller's Scan
// answers (with its own error, or a value Columns leaves to it).
func TestColumnsDecodeAsPgxScans(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, servertest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE DOMAIN columns_state AS text CHECK (VALUE <> '')`); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{
		"text": `'tok_01h'::text`, "textornull": `'a reason'::text`, "int8": `9007199254740993::int8`,
		"bytea": `'\x00ff10'::bytea`, "time": `'2026-12-05 09:30:00.123456+00'::timestamptz`,
		"timeornull":  `'1999-12-31 23:59:59.999999+00'::timestamptz`,
		"textarray":   `ARRAY['organizations:read', 'policies:write', '']::text[]`,
		"prefixarray": `ARRAY['10.0.0.0/8', '192.0.2.7/32', '2001:db8::/32', '::1/128']::cidr[]`,
	}
	order := []string{"text", "textornull", "int8", "bytea", "time", "timeornull", "textarray", "prefixarray"}
	cases := []struct {
		name   string
		change map[string]string
		read   bool // Columns reads it (else the caller's Scan does)
	}{
		{"every value", nil, true},
		{"NULLs where allowed", map[string]string{"textornull": `NULL::text`, "timeornull": `NULL::timestamptz`, "textarray": `NULL::text[]`, "prefixarray": `NULL::cidr[]`}, true},
		{"empty arrays", map[string]string{"textarray": `'{}'::text[]`, "prefixarray": `'{}'::cidr[]`}, true},
		{"empty text and bytea", map[string]string{"text": `''::text`, "bytea": `''::bytea`}, true},
		{"a domain over text", map[string]string{"text": `'active'::columns_state`}, true},
		{"times before 2000 and far off", map[string]string{"time": `'1970-01-01 00:00:00.000001+00'::timestamptz`, "timeornull": `'4000-01-01 00:00:00+00'::timestamptz`}, true},
		{"negative bigint", map[string]string{"int8": `(-9223372036854775807 - 1)::int8`}, true},
		{"one-element arrays", map[string]string{"textarray": `ARRAY['x']::text[]`, "prefixarray": `ARRAY['0.0.0.0/0']::cidr[]`}, true},
		{"an array starting at 0", map[string]string{"textarray": `'[0:1]={a,b}'::text[]`}, true},
		{"infinite time", map[string]string{"time": `'infinity'::timestamptz`}, false},
		{"-infinite time or null", map[string]string{"timeornull": `'-infinity'::timestamptz`}, false},
		{"NULL text", map[string]string{"text": `NULL::text`}, false},
		{"NULL bigint", map[string]string{"int8": `NULL::int8`}, false},
		{"NULL bytea", map[string]string{"bytea": `NULL::bytea`}, false},
		{"NULL time", map[string]string{"time": `NULL::timestamptz`}, false},
		{"a NULL element", map[string]string{"textarray": `ARRAY['a', NULL]::text[]`}, false},
		{"two dimensions", map[string]string{"textarray": `'{{a,b},{c,d}}'::text[]`}, false},
		{"int4 for int8", map[string]string{"int8": `7::int4`}, false},
		{"varchar for text", map[string]string{"textornull": `'v'::varchar`}, true},
		{"numeric for text", map[string]string{"text": `12::numeric`}, false},
		{"a bigint for text", map[string]string{"text": `12::int8`}, false},
		{"timestamp for timestamptz", map[string]string{"time": `'2026-01-01'::timestamp`}, false},
		{"inet for cidr", map[string]string{"prefixarray": `ARRAY['10.1.2.3/8']::inet[]`}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sql := "SELECT "
			for i, col := range order {
				v := base[col]
				if c, ok := tc.change[col]; ok {
					v = c
				}
				if i > 0 {
					sql += ", "
				}
				sql += v + " AS " + col
			}
			rows, err := conn.Query(ctx, sql)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			if !rows.Next() {
				t.Fatal(rows.Err())
			}
			c := db.ColumnsOf(rows)
			got := readColumns(&c)
			var want columnsRow
			scanErr := rows.Scan(want.dests()...)
			if c.OK() != tc.read {
				t.Fatalf("Columns read the row: %v, want %v (pgx's Scan: %v)", c.OK(), tc.read, scanErr)
			}
			if !c.OK() {
				return // the caller's Scan answers, whatever it answers
			}
			if scanErr != nil {
				t.Fatalf("Columns read a row pgx's Scan refuses: %v", scanErr)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("Columns read\n%#v\npgx's Scan\n%#v", got, want)
			}
		})
	}
}

// TestColumnsLeftUnread: a row with more values than were read is not read.
func TestColumnsLeftUnread(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, servertest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT 'a'::text, 'b'::text`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	rows.Next()
	c := db.ColumnsOf(rows)
	if c.Text(); c.OK() {
		t.Fatal("one of two values read: OK")
	}
	if c.Text(); !c.OK() {
		t.Fatal("both read: not OK")
	}
	if c.Text(); c.OK() {
		t.Fatal("a third read of two values: OK")
	}
}
