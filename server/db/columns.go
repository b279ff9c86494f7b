package db

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// Columns reads a row's values from PostgreSQL's binary format by hand, for the rows the server
// reads on nearly every request (the operator token, the organization by ID). pgx plans the scan
// of each column again for every query it runs, and reaches the destination's type by
// reflection: for these rows that planning cost more than the values' decoding (about a tenth of
// the server's CPU per authenticated GET in a profile under load).
//
// A Columns takes the values in order, each with the method for its Go type. A value that is not
// what the method expects (another type or format, NULL where the type has none, an infinite
// time) is not guessed at: OK then reports false, and the caller scans the same row with pgx's
// own Scan, whose result and errors are the reference (TestColumnsDecodeAsPgxScans holds the two
// to the same values). Read every value before the row's next Next: pgx reuses their memory.
type Columns struct {
	fds  []pgconn.FieldDescription
	vals [][]byte
	i    int
	bad  bool
}

// ColumnsOf starts reading the current row of rows.
func ColumnsOf(rows pgx.Rows) Columns {
	return Columns{fds: rows.FieldDescriptions(), vals: rows.RawValues()}
}

// OK reports whether every value was read as expected and no value is left unread.
func (c *Columns) OK() bool { return !c.bad && c.i == len(c.vals) && len(c.fds) == len(c.vals) }

// next returns the next value if it is binary of type oid (or NULL, with null true).
func (c *Columns) next(oid uint32) (v []byte, null bool) {
	if c.bad || c.i >= len(c.vals) || c.i >= len(c.fds) {
		c.bad = true
		return nil, false
	}
	fd, v := c.fds[c.i], c.vals[c.i]
	c.i++
	if fd.Format != pgtype.BinaryFormatCode || fd.DataTypeOID != oid {
		c.bad = true
		return nil, false
	}
	return v, v == nil
}

func (c *Columns) fail() { c.bad = true }

// Text reads a text value. pgx receives text in the text format, as it does a domain over text
// (whose OID is the domain's); a value in the text format reads into a string as its bytes,
// whatever its type, and so does text or varchar in the binary format, as pgx reads them.
func (c *Columns) Text() string {
	v, null := c.text()
	if null {
		c.fail()
	}
	return string(v)
}

// TextOrNull reads a text value that may be NULL.
func (c *Columns) TextOrNull() *string {
	v, null := c.text()
	if null || c.bad {
		return nil
	}
	s := string(v)
	return &s
}

func (c *Columns) text() (v []byte, null bool) {
	if c.bad || c.i >= len(c.vals) || c.i >= len(c.fds) {
		c.bad = true
		return nil, false
	}
	fd, v := c.fds[c.i], c.vals[c.i]
	c.i++
	if fd.Format != pgtype.TextFormatCode && fd.DataTypeOID != pgtype.TextOID && fd.DataTypeOID != pgtype.VarcharOID {
		c.bad = true
		return nil, false
	}
	return v, v == nil
}

// Int8 reads a bigint.
func (c *Columns) Int8() int64 {
	v, _ := c.next(pgtype.Int8OID)
	if len(v) != 8 {
		c.fail()
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

// Bytea reads a bytea value (a copy: the row's memory is pgx's).
func (c *Columns) Bytea() []byte {
	v, null := c.next(pgtype.ByteaOID)
	if null || c.bad {
		c.fail()
		return nil
	}
	return append([]byte{}, v...)
}

// microsecondsToY2K is 2000-01-01T00:00:00Z, PostgreSQL's epoch, in microseconds since Unix's.
const microsecondsToY2K = 946_684_800 * 1_000_000

// Time reads a timestamptz as pgx does: a time.Time in the local zone; an infinite or
// out-of-range time is not read (pgx refuses it, with its own error).
func (c *Columns) Time() time.Time {
	v, null := c.next(pgtype.TimestamptzOID)
	if null {
		c.fail()
	}
	return c.time(v)
}

// TimeOrNull reads a timestamptz that may be NULL.
func (c *Columns) TimeOrNull() *time.Time {
	v, null := c.next(pgtype.TimestamptzOID)
	if null || c.bad {
		return nil
	}
	t := c.time(v)
	return &t
}

var (
	minTime = time.Date(-4713, time.November, 24, 0, 0, 0, 0, time.UTC) // 4714 BC, PostgreSQL's first day
	endTime = time.Date(294277, time.January, 1, 0, 0, 0, 0, time.UTC)  // the day after its last
)

func (c *Columns) time(v []byte) time.Time {
	if c.bad || len(v) != 8 {
		c.fail()
		return time.Time{}
	}
	us := int64(binary.BigEndian.Uint64(v))
	if us == 1<<63-1 || us == -1<<63 { // infinity, -infinity
		c.fail()
		return time.Time{}
	}
	t := time.Unix(microsecondsToY2K/1_000_000+us/1_000_000, (microsecondsToY2K%1_000_000*1_000)+(us%1_000_000*1_000))
	if t.Before(minTime) || !t.Before(endTime) {
		c.fail()
		return time.Time{}
	}
	return t
}

// arrayElements returns an array value's elements, each the value's bytes; a NULL array reads
// as nil, an empty one as an empty slice (as pgx reads them into a slice). Only one-dimensional
// arrays of elemOID with no NULL element are read.
func (c *Columns) arrayElements(oid, elemOID uint32) ([][]byte, bool) {
	v, null := c.next(oid)
	if c.bad || null {
		return nil, null
	}
	if len(v) < 12 {
		c.fail()
		return nil, false
	}
	ndim, elem := binary.BigEndian.Uint32(v), binary.BigEndian.Uint32(v[8:])
	if elem != elemOID || ndim > 1 {
		c.fail()
		return nil, false
	}
	if ndim == 0 {
		return [][]byte{}, false
	}
	if len(v) < 20 {
		c.fail()
		return nil, false
	}
	n := int32(binary.BigEndian.Uint32(v[12:]))
	rest := v[20:]
	if n < 0 || int(n) > len(rest)/4 {
		c.fail()
		return nil, false
	}
	out := make([][]byte, n)
	for i := range out {
		if len(rest) < 4 {
			c.fail()
			return nil, false
		}
		l := int32(binary.BigEndian.Uint32(rest))
		rest = rest[4:]
		if l < 0 || int(l) > len(rest) { // a NULL element, or a truncated value
			c.fail()
			return nil, false
		}
		out[i], rest = rest[:l], rest[l:]
	}
	if len(rest) != 0 {
		c.fail()
		return nil, false
	}
	return out, false
}

// TextArray reads a text[].
func (c *Columns) TextArray() []string {
	elems, null := c.arrayElements(pgtype.TextArrayOID, pgtype.TextOID)
	if null || c.bad {
		return nil
	}
	out := make([]string, len(elems))
	for i, e := range elems {
		out[i] = string(e)
	}
	return out
}

// PrefixArray reads a cidr[].
func (c *Columns) PrefixArray() []netip.Prefix {
	elems, null := c.arrayElements(pgtype.CIDRArrayOID, pgtype.CIDROID)
	if null || c.bad {
		return nil
	}
	out := make([]netip.Prefix, len(elems))
	for i, e := range elems {
		// family, bits, is_cidr, address length, then the address's 4 or 16 bytes
		if len(e) != 8 && len(e) != 20 {
			c.fail()
			return nil
		}
		addr, ok := netip.AddrFromSlice(e[4:])
		if !ok {
			c.fail()
			return nil
		}
		out[i] = netip.PrefixFrom(addr, int(e[1]))
	}
	return out
}
