package domain

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// The bounds, for the external tests.
const (
	MaxMemberBytes      = maxMemberBytes
	MaxArchiveMembers   = maxArchiveMembers
	ManifestHeadBytes   = manifestHeadBytes
	ManifestMemberBytes = manifestMemberBytes
	MaxTrailingBytes    = maxTrailingBytes
)

// TestBoundedArchive: the decompressed archive reads to maxArchiveBytes exactly, and one byte
// more is refused as corrupt, however it is read.
func TestBoundedArchive(t *testing.T) {
	for _, size := range []int{10, 11} {
		for _, chunk := range []int{1, 3, 64} {
			b := &boundedArchive{r: bytes.NewReader(make([]byte, size)), left: 10}
			buf := make([]byte, chunk)
			var err error
			for err == nil {
				_, err = b.Read(buf)
			}
			if refused := errors.Is(err, ErrArchiveCorrupt); refused != (size > 10) {
				t.Errorf("%d bytes bounded at 10, read %d at a time: %v", size, chunk, err)
			}
		}
	}
}

// TestRowReaderBound: a row of maxRowBytes is read, with or without its '\n'; one byte more is
// refused as corrupt (not as a malformed row, which the import would only note), and so is a
// longer one, whose rest is not read.
func TestRowReaderBound(t *testing.T) {
	row := func(n int) []byte { // {"id": "x...x"} of n bytes
		return []byte(`{"id": "` + strings.Repeat("x", n-len(`{"id": ""}`)) + `"}`)
	}
	var v struct {
		ID string `json:"id"`
	}
	for _, c := range []struct {
		name    string
		in      []byte
		refused bool
	}{
		{"at the bound", append(row(maxRowBytes), '\n'), false},
		{"at the bound, the member's last without its newline", row(maxRowBytes), false},
		{"one byte past", append(row(maxRowBytes+1), '\n'), true},
		{"one byte past, without a newline", row(maxRowBytes + 1), true},
	} {
		rr := newRowReader(bytes.NewReader(c.in))
		ok, err := rr.next(&v)
		if refused := errors.Is(err, ErrArchiveCorrupt); refused != c.refused || ok == c.refused {
			t.Errorf("%s: %v %v, refused %v", c.name, ok, err, c.refused)
		}
	}
	// A row of 1 GiB: refused having read no more than the bound and a read's worth.
	src := &countingReader{r: io.LimitReader(infiniteX{}, 1<<30)}
	if _, err := newRowReader(src).next(&v); !errors.Is(err, ErrArchiveCorrupt) || src.n > 2*maxRowBytes {
		t.Errorf("a row of 1 GiB: %v after %d bytes", err, src.n)
	}
}

type infiniteX struct{}

func (infiniteX) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}
