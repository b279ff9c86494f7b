package db

import (
	"encoding/binary"
	"strings"
)

// FormatID writes a key of 128 bits stored as bytes (big-endian: a uuid column, which compares
// them in that order) as an ID of NewID's shape: prefix, "_" and 26 characters that sort as the
// bits do.
func FormatID(prefix string, key [16]byte) string {
	return encodeID(prefix, binary.BigEndian.Uint64(key[:8]), binary.BigEndian.Uint64(key[8:]))
}

// ParseID reads an ID of NewID's shape with prefix back into its 128 bits (FormatID's
// inverse); ok is false for anything else.
func ParseID(prefix, id string) (key [16]byte, ok bool) {
	s, found := strings.CutPrefix(id, prefix+"_")
	if !found || len(s) != 26 || s[0] > '7' { // 130 bits: the top two are zero
		return key, false
	}
	var hi, lo uint64
	for i := range len(s) {
		v := strings.IndexByte(crockford, s[i])
		if v < 0 {
			return key, false
		}
		hi = hi<<5 | lo>>59
		lo = lo<<5 | uint64(v)
	}
	binary.BigEndian.PutUint64(key[:8], hi)
	binary.BigEndian.PutUint64(key[8:], lo)
	return key, true
}
