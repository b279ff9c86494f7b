package domain

import (
	"errors"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"renga.dev/renga/server/jsonquote"
)

// renderObservation writes the current row of the observations query as PostgreSQL's
// row_to_json writes (installation_id, batch_id, observed_at, received_at, kind, data), byte for
// byte: PostgreSQL spent most of an export making these lines, while the export's own goroutine
// waited for them. Strings are escaped as PostgreSQL escapes them (jsonquote.Postgres), times are
// written in UTC as it writes a timestamptz in JSON (appendPGJSONTime; the transaction's TimeZone
// is UTC), and data is the jsonb's text as PostgreSQL gives it. TestExportedObservationsArePostgresJSON holds the
// lines to row_to_json's.
func renderObservation(s *rowScan, rows pgx.Rows, b []byte) ([]byte, error) {
	if err := rows.Scan(s.args...); err != nil {
		return b, err
	}
	observed, received := s.observed, s.received
	v := rows.RawValues()
	if v[0] == nil || v[1] == nil || v[4] == nil || v[5] == nil || !observed.Valid || !received.Valid {
		return b, errors.New("a NULL column")
	}
	b = append(b, `{"installation_id":`...)
	b = jsonquote.Postgres(b, v[0])
	b = append(b, `,"batch_id":`...)
	b = jsonquote.Postgres(b, v[1])
	b = append(b, `,"observed_at":`...)
	b = appendPGJSONTime(b, observed)
	b = append(b, `,"received_at":`...)
	b = appendPGJSONTime(b, received)
	b = append(b, `,"kind":`...)
	b = jsonquote.Postgres(b, v[4])
	b = append(b, `,"data":`...)
	b = append(b, v[5]...)
	return append(b, '}'), nil
}

// rowScan is renderObservation's scan destinations and Scan's arguments, made once for an
// export's rows: made for each row, they escaped to the heap, and that garbage grew an export's
// heap far beyond what it holds live.
type rowScan struct {
	observed, received pgtype.Timestamptz
	args               []any // the observations query's columns: the two times scanned, the rest raw
}

func newRowScan() *rowScan {
	s := &rowScan{}
	s.args = []any{nil, nil, &s.observed, &s.received, nil, nil}
	return s
}

// appendPGJSONTime appends t as PostgreSQL writes a timestamptz in JSON with the TimeZone UTC:
// "YYYY-MM-DDThh:mm:ss[.ffffff]+00:00", the fraction without its trailing zeros, a year before 1
// as "YYYY-...+00:00 BC" (year 0 is 1 BC), and "infinity" or "-infinity".
func appendPGJSONTime(b []byte, t pgtype.Timestamptz) []byte {
	switch t.InfinityModifier {
	case pgtype.Infinity:
		return append(b, `"infinity"`...)
	case pgtype.NegativeInfinity:
		return append(b, `"-infinity"`...)
	}
	u := t.Time.UTC()
	b = append(b, '"')
	if y := u.Year(); y < 1 {
		b = appendYear(b, 1-y)
		b = u.AppendFormat(b, "-01-02T15:04:05.999999-07:00")
		return append(b, ` BC"`...)
	}
	b = u.AppendFormat(b, "2006-01-02T15:04:05.999999-07:00")
	return append(b, '"')
}

// appendYear appends y with at least four digits.
func appendYear(b []byte, y int) []byte {
	for d := 1000; d > 1 && y < d; d /= 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, int64(y), 10)
}
