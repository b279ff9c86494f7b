package domain

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"regexp"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/klauspost/compress/gzip"

	"renga.dev/renga/server/db"
)

var memberName = regexp.MustCompile(`^([a-z_]+)/([0-9]{6})\.jsonl$`)

// ImportArchive reads an archive from body into the empty organization orgID, in tx: the
// organization is locked and checked empty first, every member is verified against the
// manifest (the archive's last member) as it is read, and any failure returns an error so
// that the caller's transaction rolls back and the organization stays empty. It returns the
// import's transfer, recorded as succeeded.
func ImportArchive(ctx context.Context, tx pgx.Tx, orgID, requestedBy string, body io.Reader) (Transfer, Organization, error) {
	o, err := lockOrganization(ctx, tx, orgID)
	if err != nil {
		return Transfer{}, o, err
	}
	if o.State != StateActive {
		return Transfer{}, o, ErrInvalidState
	}
	var occupied bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM memberships WHERE organization_id = $1)
		OR EXISTS (SELECT 1 FROM pending_memberships WHERE organization_id = $1)
		OR EXISTS (SELECT 1 FROM installations WHERE organization_id = $1)
		OR EXISTS (SELECT 1 FROM intake_keys WHERE organization_id = $1)
		OR EXISTS (SELECT 1 FROM organization_identity_providers WHERE organization_id = $1)
		OR EXISTS (SELECT 1 FROM transfers WHERE organization_id = $1 AND kind = 'import')`, orgID).Scan(&occupied); err != nil {
		return Transfer{}, o, err
	}
	if occupied {
		return Transfer{}, o, ErrDestinationNotEmpty
	}
	in := &archiveBody{r: body, sum: sha256.New()}
	im := &importer{ctx: ctx, tx: tx, orgID: orgID, users: map[string]string{}, installations: map[string]bool{},
		seen: map[string]ManifestMember{}, counts: map[string]int64{}}
	if err := im.read(in); err != nil {
		if in.err != nil && errors.Is(err, ErrArchiveCorrupt) { // the upload broke off: say so
			// Not wrapped: a network error of the caller must not read as the database unavailable.
			return Transfer{}, o, fmt.Errorf("%w: the upload broke off (%s)", ErrArchiveCorrupt, in.err.Error())
		}
		return Transfer{}, o, err
	}
	counts, err := json.Marshal(im.counts)
	if err != nil {
		return Transfer{}, o, err
	}
	var rows int64
	for _, n := range im.counts {
		rows += n
	}
	t, err := collectTransfer(tx.Query(ctx, `INSERT INTO transfers (id, organization_id, kind, state, rows_done, bytes_done,
		counts, sha256, size_bytes, requested_by) VALUES ($1, $2, 'import', 'succeeded', $3, $4, $5, $6, $4, $7)
		RETURNING `+transferColumns, db.NewID("xfr"), orgID, rows, in.n, counts, in.sum.Sum(nil), requestedBy))
	return t, o, err
}

// archiveBody counts and hashes the request's body, and keeps a read error that is the
// connection's (not an end of the stream, which a damaged archive explains), to name it.
type archiveBody struct {
	r   io.Reader
	sum hash.Hash
	n   int64
	err error
}

func (b *archiveBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.sum.Write(p[:n])
	b.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		b.err = err
	}
	return n, err
}

type importer struct {
	ctx           context.Context
	tx            pgx.Tx
	orgID         string
	users         map[string]string // source user ID → user ID here
	installations map[string]bool
	seen          map[string]ManifestMember
	counts        map[string]int64
	kindIndex     int            // the kind being read; members come in ArchiveKinds order
	members       int            // members read
	memberBytes   int64          // their sizes
	previous      ManifestMember // the member read last
	formatErr     error          // the first malformed member; reported after the manifest's version and checksums

	obsBase *ObservationID // the import's first observation's ID (observationIDs)
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrArchiveCorrupt, fmt.Sprintf(format, args...))
}

func (im *importer) read(body io.Reader) error {
	gz, err := gzip.NewReader(body)
	if err != nil {
		return corrupt("not gzip-compressed")
	}
	in := &boundedArchive{r: gz, left: maxArchiveBytes}
	tr := tar.NewReader(in)
	var manifest *Manifest
	var missing string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return readFailure("tar", err)
		}
		switch {
		case manifest != nil:
			return corrupt("a member after the manifest")
		case hdr.Name == ManifestName:
			if manifest, missing, err = im.readManifest(tr, hdr); err != nil {
				return err
			}
		default:
			if err := im.member(hdr, tr); err != nil {
				return err
			}
		}
	}
	// The rest of the stream, so that gzip checks its CRC and length: a tar writer's padding.
	if n, err := io.Copy(io.Discard, io.LimitReader(in, maxTrailingBytes+1)); err != nil {
		return readFailure("gzip", err)
	} else if n > maxTrailingBytes {
		return corrupt("more than %d bytes after the tar's end", maxTrailingBytes)
	}
	if manifest == nil {
		return corrupt("no manifest")
	}
	if manifest.FormatVersion < 1 || manifest.FormatVersion > ArchiveFormatVersion {
		return fmt.Errorf("%w: %d", ErrArchiveVersion, manifest.FormatVersion)
	}
	if missing != "" {
		return fmt.Errorf("%w: %s", ErrArchiveMemberMissing, missing)
	}
	return im.verify(manifest)
}

// verify holds what was read to the manifest, whose members are those listed that the archive
// held (a listed member it did not hold is missing: readManifest): each member's SHA-256, rows
// and size, nothing unlisted, and the counts per kind. An altered member is named as such
// before the malformed rows it may have caused.
func (im *importer) verify(m *Manifest) error {
	listed := map[string]bool{}
	for _, want := range m.Members {
		listed[want.Name] = true
	}
	for _, want := range m.Members {
		if got := im.seen[want.Name]; got.SHA256 != want.SHA256 {
			return fmt.Errorf("%w: %s", ErrArchiveChecksum, want.Name)
		}
	}
	if im.formatErr != nil {
		return im.formatErr
	}
	for _, want := range m.Members {
		if got := im.seen[want.Name]; got.Rows != want.Rows || got.Kind != want.Kind || got.Bytes != want.Bytes {
			return corrupt("%s: %d rows of %s in %d bytes, the manifest says %d of %s in %d", want.Name, got.Rows, got.Kind,
				got.Bytes, want.Rows, want.Kind, want.Bytes)
		}
	}
	for name := range im.seen {
		if !listed[name] {
			return corrupt("%s is not in the manifest", name)
		}
	}
	if m.FormatVersion == 1 && im.counts["identity_providers"] > 0 {
		return corrupt("identity_providers in an archive of format version 1")
	}
	for _, kind := range ArchiveKinds() {
		if m.Counts[kind] != im.counts[kind] {
			return corrupt("%d %s, the manifest counts %d", im.counts[kind], kind, m.Counts[kind])
		}
	}
	for _, one := range []string{"organization", "settings", "policy"} {
		if im.counts[one] != 1 {
			return corrupt("%d %s rows, want 1", im.counts[one], one)
		}
	}
	return nil
}

// member reads one member, hashing it; a malformed one is noted (and the rest of the archive
// still read, so that an archive of another format version says so). A member past the
// archive's bounds is refused at once.
func (im *importer) member(hdr *tar.Header, tr io.Reader) error {
	if im.members++; im.members > maxArchiveMembers {
		return corrupt("more than %d members", maxArchiveMembers)
	}
	if hdr.Size > maxMemberBytes {
		return corrupt("%s: %d bytes, more than a member holds (%d)", hdr.Name, hdr.Size, maxMemberBytes)
	}
	// Members' sizes as tar gives them: more than the stream's bytes for a sparse file.
	if im.memberBytes += hdr.Size; im.memberBytes > maxArchiveBytes {
		return corrupt("members of more than %d bytes", int64(maxArchiveBytes))
	}
	h := sha256.New()
	r := &countingReader{r: io.TeeReader(tr, h)}
	m := ManifestMember{Name: hdr.Name}
	if _, dup := im.seen[hdr.Name]; dup && im.formatErr == nil {
		im.formatErr = corrupt("%s appears twice", hdr.Name)
	}
	kinds := ArchiveKinds()
	match := memberName.FindStringSubmatch(hdr.Name)
	idx := -1
	if match != nil {
		idx = slices.Index(kinds, match[1])
	}
	switch {
	case im.formatErr != nil:
	case hdr.Typeflag != tar.TypeReg || idx < 0:
		im.formatErr = corrupt("unexpected member %q", hdr.Name)
	case idx < im.kindIndex:
		im.formatErr = corrupt("member %q out of order", hdr.Name)
	case im.previous.Kind == kinds[idx] && im.previous.Bytes < memberPartBytes:
		// The exporter starts a kind's next part only once a part holds memberPartBytes.
		im.formatErr = corrupt("member %q after a part of %d bytes", hdr.Name, im.previous.Bytes)
	default:
		im.kindIndex = idx
		m.Kind = kinds[idx]
		rows, err := im.load(m.Kind, newRowReader(r))
		var bad *badRowError
		switch {
		case errors.As(err, &bad):
			im.formatErr = corrupt("%s: %v", hdr.Name, bad.err)
		case err != nil:
			return err
		}
		m.Rows = rows
		im.counts[m.Kind] += rows
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return readFailure(hdr.Name, err)
	}
	m.SHA256 = hex.EncodeToString(h.Sum(nil))
	m.Bytes = r.n
	im.seen[hdr.Name] = m
	im.previous = m
	return nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
