// Package jsonquote appends a string as a JSON string, quoted exactly as one of two writers
// quotes it. Marshal is encoding/json's Marshal (a stored result's headers must be the bytes
// Marshal would write). Postgres is PostgreSQL's escape_json (an export's lines must be the bytes
// its row_to_json would write): Marshal's escapes of ASCII except HTML's, every other byte as it
// is.
package jsonquote

import "encoding/json"

// Marshal appends s quoted as encoding/json's Marshal quotes it.
func Marshal(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always encodes
	return append(dst, b...)
}

// Postgres appends s quoted as PostgreSQL's escape_json quotes it (json's and jsonb's output,
// row_to_json): `"` and `\` escaped, \b, \f, \n, \r and \t short, the other control
// characters as \u00xx, and every other byte as it is, UTF-8 or not (PostgreSQL's text is valid
// in the database's encoding already). It takes bytes: the driver's raw column values.
func Postgres(dst, s []byte) []byte {
	const hexDigits = "0123456789abcdef"
	dst = append(dst, '"')
	for _, b := range s {
		switch b {
		case '"', '\\':
			dst = append(dst, '\\', b)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			if b < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			} else {
				dst = append(dst, b)
			}
		}
	}
	return append(dst, '"')
}
