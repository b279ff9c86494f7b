// Package jsonquote appends a string as a JSON string, quoted exactly as one of the standard
// library's encoders quotes it: encoding/json's Marshal (a stored result's headers and
// canonical bodies must be the bytes Marshal would write) or log/slog's JSON handler (the
// server's log lines must be the bytes slog would write). The two differ in three places:
// Marshal escapes HTML's <, > and &, and writes \b and \f short; slog writes them as they are
// and as \u0008 and \u000c. Both write `"` and `\` escaped, \n, \r and \t short, the other
// control characters as \u00XX, a byte that is not UTF-8 as \ufffd, and U+2028 and U+2029 as
// \u2028 and \u2029. Postgres quotes as PostgreSQL writes a string in JSON (an export's lines
// must be the bytes its row_to_json would write): Marshal's escapes of ASCII except HTML's, every
// other byte as it is.
package jsonquote

import (
	"math/bits"
	"unicode/utf8"
)

// Marshal appends s quoted as encoding/json's Marshal quotes it.
func Marshal(dst []byte, s string) []byte { return appendQuoted(dst, s, &marshalSafe, true) }

// Slog appends s quoted as log/slog's JSON handler quotes it.
func Slog(dst []byte, s string) []byte { return appendQuoted(dst, s, &slogSafe, false) }

// marshalSafe and slogSafe hold the ASCII bytes each encoder writes as they are.
var marshalSafe, slogSafe = safeSets()

func safeSets() (marshal, slog [utf8.RuneSelf]bool) {
	for b := range utf8.RuneSelf {
		safe := b >= 0x20 && b != '"' && b != '\\'
		slog[b] = safe
		marshal[b] = safe && b != '<' && b != '>' && b != '&'
	}
	return marshal, slog
}

const hexDigits = "0123456789abcdef"

func appendQuoted(dst []byte, s string, safe *[utf8.RuneSelf]bool, short bool) []byte {
	dst = append(dst, '"')
	i := 0
	if safe == &slogSafe {
		// Most of what a log line quotes is plain ASCII (its keys, IDs, routes): its safe bytes
		// are skipped eight at a time, the rest as any other string's.
		i = slogSafeWords(s)
	}
	start := 0
	for i < len(s) {
		if b := s[i]; b < utf8.RuneSelf {
			if safe[b] {
				i++
				continue
			}
			dst = appendEscaped(append(dst, s[start:i]...), b, short)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(append(dst, s[start:i]...), `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(append(dst, s[start:i]...), '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	return append(append(dst, s[start:]...), '"')
}

// slogSafeWords reads s eight bytes at a time and returns where the first byte slog does not
// write as it is (not in slogSafe: below 0x20, from 0x80, `"` and `\`) stands, or, when there is
// none in s's whole words, where its last partial word starts. Each word's such bytes are
// flagged at once (a subtraction's borrow may flag a byte above a flagged one, never below: the
// lowest flag is exact).
func slogSafeWords(s string) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(s); i += 8 {
		x := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		quote, backslash := x^(ones*'"'), x^(ones*'\\')
		flags := x&highs | (x-ones*0x20)&^x&highs | (quote-ones)&^quote&highs | (backslash-ones)&^backslash&highs
		if flags != 0 {
			return i + bits.TrailingZeros64(flags)/8
		}
	}
	return i
}

// appendEscaped appends the escape of the ASCII byte b: `"` and `\` after a backslash, \n, \r
// and \t short (\b and \f too when short), any other as \u00xx.
func appendEscaped(dst []byte, b byte, short bool) []byte {
	switch {
	case b == '"' || b == '\\':
		return append(dst, '\\', b)
	case b == '\n':
		return append(dst, '\\', 'n')
	case b == '\r':
		return append(dst, '\\', 'r')
	case b == '\t':
		return append(dst, '\\', 't')
	case b == '\b' && short:
		return append(dst, '\\', 'b')
	case b == '\f' && short:
		return append(dst, '\\', 'f')
	default:
		return append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
	}
}

// Postgres appends s quoted as PostgreSQL's escape_json quotes it (json's and jsonb's output,
// row_to_json): `"` and `\` escaped, \b, \f, \n, \r and \t short, the other control
// characters as \u00xx, and every other byte as it is, UTF-8 or not (PostgreSQL's text is valid
// in the database's encoding already). It takes bytes: the driver's raw column values.
func Postgres(dst, s []byte) []byte {
	dst = append(dst, '"')
	start := 0
	for i, b := range s {
		if b >= utf8.RuneSelf || slogSafe[b] {
			continue
		}
		dst = appendEscaped(append(dst, s[start:i]...), b, true)
		start = i + 1
	}
	return append(append(dst, s[start:]...), '"')
}
