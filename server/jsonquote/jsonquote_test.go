package jsonquote

import (
	"bytes"
	"encoding/json"
	"testing"
)

// inputs are every byte alone, between two letters and at each place of a longer string, and
// the strings the encoders treat apart: HTML's characters, U+2028 and U+2029, multi-byte runes,
// invalid UTF-8 (a lone byte, an encoded surrogate, a cut rune), control characters, DEL.
func inputs() []string {
	in := []string{"", "plain", "<a href=\"x\">&</a>", "\u2028\u2029", "é😀", "\xff", "\xed\xa0\x80", "a\xc3",
		"a\x00b\x1fc\x7f", "\\/", "\b\f\n\r\t", "mixed \"\\\n\u2028\xff<>&☃"}
	for b := range 256 {
		in = append(in, string([]byte{byte(b)}), "x"+string([]byte{byte(b)})+"y")
		// Every byte at every place of a longer string, and right after a control byte.
		for at := range 18 {
			long := []byte("abcdefghijklmnopqrst")
			long[at] = byte(b)
			in = append(in, string(long), string(long[:at+1]))
			if at > 0 {
				long[at-1] = 0x1f
				in = append(in, string(long))
			}
		}
	}
	return in
}

func TestMarshalIsEncodingJSONs(t *testing.T) {
	for _, s := range inputs() {
		quotedAsMarshal(t, s)
	}
}

func FuzzMarshalIsEncodingJSONs(f *testing.F) {
	for _, s := range inputs()[:12] {
		f.Add(s)
	}
	f.Fuzz(quotedAsMarshal)
}

// quotedAsMarshal fails t unless Marshal writes s as json.Marshal does.
func quotedAsMarshal(t *testing.T, s string) {
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := Marshal([]byte("x"), s); !bytes.Equal(got, append([]byte("x"), want...)) {
		t.Errorf("Marshal(%q) = %s, want x%s", s, got, want)
	}
}

// TestPostgresIsMarshalsButHTMLAndBeyondASCII: PostgreSQL's escape_json escapes ASCII as
// Marshal does except HTML's <, > and &, which it writes as they are, and writes every byte
// from 0x80 up as it is (TestExportedObservationsArePostgresJSON holds it to PostgreSQL itself).
func TestPostgresIsMarshalsButHTMLAndBeyondASCII(t *testing.T) {
	for _, s := range inputs() {
		var want []byte
		for i := range len(s) {
			switch b := s[i]; {
			case b >= 0x80 || b == '<' || b == '>' || b == '&':
				want = append(want, b)
			default:
				q := Marshal(nil, string([]byte{b}))
				want = append(want, q[1:len(q)-1]...)
			}
		}
		want = append(append([]byte(`x"`), want...), '"')
		if got := Postgres([]byte("x"), []byte(s)); !bytes.Equal(got, want) {
			t.Errorf("Postgres(%q) = %s, want %s", s, got, want)
		}
	}
}
