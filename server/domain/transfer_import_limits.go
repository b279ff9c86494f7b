package domain

import (
	"archive/tar"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// What an import reads is bounded by what an export can write (docs/transfer-archive.md,
// "Limits"): past any bound the import stops at once with ErrArchiveCorrupt, before it holds
// more than one row, one member's bookkeeping per member read, and the manifest.
const (
	// maxRowBytes bounds a row, its '\n' left out. An export's largest rows are observations and
	// the settings and policy documents: JSON that came in a request body of at most 1 MiB
	// (pipeline.MaxBodyBytes), written back by PostgreSQL's jsonb, which adds a space after each
	// ',' and ':' (at most half as long again) and writes numbers out in full (1e6 as 1000000).
	// Eight times a body leaves room for those numbers.
	maxRowBytes = 8 << 20
	// maxMemberBytes bounds a member: the exporter ends a part with the row that takes it to
	// memberPartBytes.
	maxMemberBytes = memberPartBytes + maxRowBytes
	// maxArchiveBytes bounds the whole archive decompressed: tar headers, members and what
	// follows the tar's end.
	maxArchiveBytes = 64 << 30
	// maxArchiveMembers bounds the members before the manifest: every part of a kind but its
	// last holds at least memberPartBytes, so an archive of maxArchiveBytes holds at most that
	// many parts and one short part per kind (16 leaves room for kinds to come).
	maxArchiveMembers = maxArchiveBytes/memberPartBytes + 16
	// The manifest lists each member before it in at most manifestMemberBytes (an export's
	// entry takes under 256), after a head of at most manifestHeadBytes (source, organization,
	// counts).
	manifestMemberBytes = 512
	manifestHeadBytes   = 64 << 10
	// maxSourceIDBytes bounds a source user's ID, which the import keeps until the memberships.
	maxSourceIDBytes = 64
	// maxTrailingBytes bounds what may follow the tar's end (a tar writer's padding to its
	// record size: 10 KiB for GNU tar's default).
	maxTrailingBytes = 1 << 20
)

// boundedArchive is the decompressed archive, refused past maxArchiveBytes.
type boundedArchive struct {
	r    io.Reader
	left int64
}

func (b *boundedArchive) Read(p []byte) (int, error) {
	// One byte past the bound is read to tell an archive of exactly maxArchiveBytes from a
	// longer one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, corrupt("more than %d bytes decompressed", int64(maxArchiveBytes))
	}
	return n, err
}

// readFailure is a read error of the archive: a limit's refusal as it is, anything else (a
// damaged stream, the upload breaking off) as corrupt.
func readFailure(what string, err error) error {
	if errors.Is(err, ErrArchiveCorrupt) {
		return err
	}
	return corrupt("%s: %v", what, err)
}

// rowReader reads a member's rows: one JSON document a line, none longer than maxRowBytes.
// bufio.Scanner's buffer grows to the longest line, and it refuses one past its maximum
// without reading it further.
type rowReader struct {
	sc *bufio.Scanner
	n  int64 // rows read
}

func newRowReader(r io.Reader) *rowReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, maxRowBytes+1) // the row and its '\n'
	return &rowReader{sc: sc}
}

// next decodes the next row into v. It reports false at the member's end, or with an error:
// a *badRowError for a row that is not JSON of v's shape, a corrupt one for a row too long or
// a stream that cannot be read. Blank lines are skipped.
func (rr *rowReader) next(v any) (bool, error) {
	for rr.sc.Scan() {
		line := rr.sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		rr.n++
		if err := json.Unmarshal(line, v); err != nil {
			return false, bad("row %d: %v", rr.n, err)
		}
		return true, nil
	}
	switch err := rr.sc.Err(); {
	case errors.Is(err, bufio.ErrTooLong):
		return false, corrupt("row %d is longer than %d bytes", rr.n+1, maxRowBytes)
	case err != nil:
		return false, readFailure(fmt.Sprintf("row %d", rr.n+1), err)
	}
	return false, nil
}

// readManifest reads the manifest: at most manifestHeadBytes and manifestMemberBytes for each
// member before it, read into one buffer of its size. Only the listed members the archive held
// are kept (listedMembers).
func (im *importer) readManifest(r io.Reader, hdr *tar.Header) (*Manifest, string, error) {
	most := manifestHeadBytes + manifestMemberBytes*int64(im.members)
	if hdr.Typeflag != tar.TypeReg || hdr.Size < 0 || hdr.Size > most {
		return nil, "", corrupt("a manifest of %d bytes after %d members (a file of at most %d)", hdr.Size, im.members, most)
	}
	raw := make([]byte, hdr.Size)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, "", readFailure("manifest", err)
	}
	m := struct {
		Manifest
		Members listedMembers `json:"members"` // in place of Manifest.Members
	}{Members: listedMembers{seen: im.seen}}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, "", corrupt("manifest: %v", err)
	}
	m.Manifest.Members = m.Members.kept
	return &m.Manifest, m.Members.missing, nil
}

// listedMembers reads the manifest's members one at a time, keeping those the archive held
// (each once: so no more than were read) and naming the first it did not hold. A manifest's
// length is bounded, yet its entries could each be smaller than what a kept one costs.
type listedMembers struct {
	seen    map[string]ManifestMember
	kept    []ManifestMember
	missing string
}

func (l *listedMembers) UnmarshalJSON(raw []byte) error {
	if string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return errors.New("members is not an array")
	}
	listed := map[string]bool{}
	for dec.More() {
		var m ManifestMember
		if err := dec.Decode(&m); err != nil {
			return fmt.Errorf("members: %w", err)
		}
		switch _, held := l.seen[m.Name]; {
		case !held:
			if l.missing == "" {
				l.missing = m.Name
			}
		case listed[m.Name]:
			return fmt.Errorf("%s listed twice", m.Name)
		default:
			listed[m.Name] = true
			l.kept = append(l.kept, m)
		}
	}
	_, err := dec.Token()
	return err
}
