package domain

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/klauspost/compress/gzip"

	"renga.dev/renga/server/db"
)

// ArchiveFormatVersion is the archive format this server writes (docs/transfer-archive.md). It
// reads this one and every earlier one: version 1 is version 2 without identity_providers.
const ArchiveFormatVersion = 2

// ManifestName is the archive's last member: it describes every member before it.
const ManifestName = "manifest.json"

// Sizes of the export's pieces: a member is cut into parts of about memberPartBytes (a tar
// header needs its member's size, so a part is held in memory until it is written), and the
// compressed archive is stored in chunks of ArchiveChunkBytes.
const (
	memberPartBytes   = 4 << 20
	ArchiveChunkBytes = 1 << 20
)

// Manifest describes an archive: where it comes from, what it holds and every member's SHA-256.
type Manifest struct {
	FormatVersion int              `json:"format_version"`
	Source        ManifestSource   `json:"source"`
	Organization  ManifestOrg      `json:"organization"`
	CreatedAt     time.Time        `json:"created_at"`
	Counts        map[string]int64 `json:"counts"`
	Members       []ManifestMember `json:"members"`
}

// ManifestSource is the deployment an archive was exported from.
type ManifestSource struct {
	DeploymentID *string `json:"deployment_id"`
	PublicURL    string  `json:"public_url"`
}

// ManifestOrg is the exported organization.
type ManifestOrg struct {
	ID          string `json:"id"`
	Slug        string `json:"slug"`
	DisplayName string `json:"display_name"`
}

// ManifestMember is one member of the archive.
type ManifestMember struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Rows   int64  `json:"rows"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// ArchiveSource is the exporting deployment, for the manifest.
type ArchiveSource struct {
	DeploymentID string // "" when the deployment has none
	PublicURL    string
}

// exportKinds are the archive's kinds, in the order they are written and must be imported
// (installations before what refers to them). Each query returns one JSON document per row,
// made by PostgreSQL, with the columns that travel: never a credential (no password, session,
// API key, intake key, invitation, or secret of any kind exists in these columns). The one
// exception is observations, nearly all of an archive's rows: their query returns the columns,
// and render writes the line PostgreSQL's row_to_json would (renderObservation).
var exportKinds = []exportKind{
	{"organization", `SELECT json_build_object('id', id, 'slug', slug, 'display_name', display_name,
		'state', state, 'created_at', created_at)::text FROM organizations WHERE id = $1`, nil},
	{"settings", exportDocumentSQL("organization_settings"), nil},
	{"policy", exportDocumentSQL("organization_policies"), nil},
	{"identity_providers", `SELECT json_build_object('id', id, 'slug', slug, 'protocol', protocol, 'issuer', issuer,
		'display_name', display_name, 'client_id', client_id, 'scopes', scopes, 'allowed_email_domains', allowed_email_domains,
		'has_client_secret', client_secret IS NOT NULL, 'state', state, 'disabled_reason', disabled_reason,
		'disabled_at', disabled_at, 'created_at', created_at)::text
		FROM organization_identity_providers WHERE organization_id = $1 ORDER BY id`, nil},
	{"users", `SELECT json_build_object('id', u.id, 'email', u.email, 'display_name', u.display_name, 'created_at', u.created_at)::text
		FROM users u WHERE u.id IN (SELECT user_id FROM memberships WHERE organization_id = $1
			UNION SELECT user_id FROM pending_memberships WHERE organization_id = $1) ORDER BY u.id`, nil},
	{"memberships", `SELECT json_build_object('user_id', user_id, 'role', role, 'created_at', created_at, 'pending', pending)::text
		FROM (SELECT user_id, role, created_at, false AS pending FROM memberships WHERE organization_id = $1
			UNION ALL SELECT user_id, role, source_created_at, true FROM pending_memberships p WHERE organization_id = $1
			AND NOT EXISTS (SELECT 1 FROM memberships m WHERE m.organization_id = p.organization_id AND m.user_id = p.user_id)) m
		ORDER BY user_id`, nil},
	{"installations", `SELECT json_build_object('id', id, 'public_key', encode(public_key, 'base64'), 'hostname', hostname,
		'os', os, 'registered_at', registered_at, 'last_seen_at', last_seen_at)::text
		FROM installations WHERE organization_id = $1 ORDER BY id`, nil},
	{"observation_batches", `SELECT json_build_object('installation_id', installation_id, 'batch_id', batch_id, 'received_at', received_at)::text
		FROM observation_batches WHERE organization_id = $1 ORDER BY installation_id, batch_id`, nil},
	{"observations", `SELECT installation_id, batch_id, observed_at, received_at, kind, data::text
		FROM observations WHERE organization_id = $1 ORDER BY id`, renderObservation},
	{"jobs", `SELECT json_build_object('id', id, 'installation_id', installation_id, 'command', command, 'state', state,
		'created_at', created_at, 'delivered_at', delivered_at, 'completed_at', completed_at, 'result', result)::text
		FROM jobs WHERE organization_id = $1 ORDER BY id`, nil},
}

// exportKind is one kind of the archive: its query and, for observations, its renderer.
type exportKind struct {
	kind, query string
	render      func(s *rowScan, rows pgx.Rows, line []byte) ([]byte, error)
}

// ArchiveKinds lists the archive's kinds in order.
func ArchiveKinds() []string {
	out := make([]string, len(exportKinds))
	for i, k := range exportKinds {
		out[i] = k.kind
	}
	return out
}

// ErrTransferCancelled: the export was cancelled while it ran.
var errExportCancelled = errors.New("export cancelled")

// WorkExport works one export, as its job does: under a session advisory lock on the
// transfer, so that two processes (a server's worker and a release command that waits for its
// export, or a job River rescued after a crash) never write one archive at once; whichever
// comes second finds it locked or already finished. It reports whether this call ran it.
func WorkExport(ctx context.Context, pool *pgxpool.Pool, id string, src ArchiveSource) (bool, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	key := transferLockKey(id)
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&locked); err != nil || !locked {
		return false, err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, key) }()
	t, run, err := StartExport(ctx, pool, id)
	if err != nil || !run {
		return false, err
	}
	return true, RunExport(ctx, pool, t, src)
}

func transferLockKey(id string) int64 {
	h := sha256.Sum256([]byte("transfer:" + id))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

// StartExport moves a pending (or, after a crash, running) export to running. It reports
// false when the export is no longer to run (cancelled, or finished by an earlier attempt).
func StartExport(ctx context.Context, pool *pgxpool.Pool, id string) (Transfer, bool, error) {
	t, err := collectTransfer(pool.Query(ctx, `UPDATE transfers SET state = 'running', rows_done = 0, bytes_done = 0,
		updated_at = now() WHERE id = $1 AND kind = 'export' AND state IN ('pending', 'running') RETURNING `+transferColumns, id))
	if errors.Is(err, ErrNotFound) {
		return t, false, nil
	}
	if err != nil {
		return t, false, err
	}
	// An earlier attempt's chunks (a crash) are written again.
	_, err = pool.Exec(ctx, `DELETE FROM transfer_chunks WHERE transfer_id = $1`, id)
	return t, err == nil, err
}

// RunExport writes the archive of a running export into its chunks and marks it succeeded,
// or failed with a reason. It reads the organization in one snapshot, streaming rows, so
// memory stays flat whatever the organization's size; between chunks it notices a
// cancellation and stops.
func RunExport(ctx context.Context, pool *pgxpool.Pool, t Transfer, src ArchiveSource) error {
	err := writeArchive(ctx, pool, t, src)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errExportCancelled):
		_, derr := pool.Exec(context.WithoutCancel(ctx), `DELETE FROM transfer_chunks WHERE transfer_id = $1`, t.ID)
		return derr
	}
	ctx = context.WithoutCancel(ctx)
	// Failed, and the freeze of an export for a move lifted (agents' writes go on), at once.
	// The organization's row first: the lock order of every transfer change.
	if ferr := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT 1 FROM organizations WHERE id = $1 FOR NO KEY UPDATE`, t.OrganizationID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE transfers SET state = 'failed', failure = $2, updated_at = now()
			WHERE id = $1 AND state = 'running'`, t.ID, "the export could not be written; start a new one")
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		return endFreeze(ctx, tx, t)
	}); ferr != nil {
		return errors.Join(err, ferr)
	}
	_, derr := pool.Exec(ctx, `DELETE FROM transfer_chunks WHERE transfer_id = $1`, t.ID)
	return errors.Join(err, derr)
}

func writeArchive(ctx context.Context, pool *pgxpool.Pool, t Transfer, src ArchiveSource) error {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SET LOCAL TimeZone = 'UTC'`); err != nil {
		return err
	}
	var org ManifestOrg
	if err := tx.QueryRow(ctx, `SELECT id, slug, display_name FROM organizations WHERE id = $1`, t.OrganizationID).
		Scan(&org.ID, &org.Slug, &org.DisplayName); err != nil {
		return err
	}
	cw := &chunkWriter{ctx: ctx, pool: pool, id: t.ID, sum: sha256.New()}
	// Speed over size: the archive is written once and read once, and level 1 keeps the
	// export near the rate PostgreSQL renders rows. klauspost/compress writes the same gzip
	// format faster than compress/gzip.
	gz, err := gzip.NewWriterLevel(cw, gzip.BestSpeed)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(gz)
	m := Manifest{FormatVersion: ArchiveFormatVersion, Source: ManifestSource{PublicURL: src.PublicURL},
		Organization: org, CreatedAt: time.Now().UTC().Truncate(time.Microsecond), Counts: map[string]int64{}}
	if src.DeploymentID != "" {
		m.Source.DeploymentID = &src.DeploymentID
	}
	if err := writeMembers(ctx, tx, t, tw, cw, &m); err != nil {
		return err
	}
	if err := closeArchive(tw, gz, cw, &m); err != nil {
		return err
	}
	counts, err := json.Marshal(m.Counts)
	if err != nil {
		return err
	}
	tag, err := pool.Exec(ctx, `UPDATE transfers SET state = 'succeeded', sha256 = $2, size_bytes = $3, counts = $4,
		rows_done = $5, bytes_done = $3, updated_at = now() WHERE id = $1 AND state = 'running'`,
		t.ID, cw.sum.Sum(nil), cw.total, counts, cw.rows)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return errExportCancelled
	}
	return nil
}

// writeMembers writes every kind's rows, in exportKinds' order, as members of tw, and counts
// them in m.
func writeMembers(ctx context.Context, tx pgx.Tx, t Transfer, tw *tar.Writer, cw *chunkWriter, m *Manifest) error {
	var rendered []byte // render's line, its buffer kept from row to row
	scan := newRowScan()
	// One part's buffer for every kind, at its full size at once, rather than grown by
	// doubling. A part ends with the line that takes it past memberPartBytes; a longer line
	// grows it.
	part := bytes.NewBuffer(make([]byte, 0, memberPartBytes+64<<10))
	for _, k := range exportKinds {
		mw := &memberWriter{tw: tw, kind: k.kind, manifest: m, cw: cw, buf: part}
		var err error
		if rendered, err = writeKind(ctx, tx, t, k, mw, scan, rendered); err != nil {
			return err
		}
		if err := mw.flush(); err != nil {
			return err
		}
		m.Counts[k.kind] = mw.rows
	}
	return nil
}

// writeKind streams k's rows into mw, one JSON line each. rendered is render's buffer, returned
// to be kept for the next kind.
func writeKind(ctx context.Context, tx pgx.Tx, t Transfer, k exportKind, mw *memberWriter, scan *rowScan, rendered []byte) ([]byte, error) {
	rows, err := tx.Query(ctx, k.query, t.OrganizationID)
	if err != nil {
		return rendered, err
	}
	defer rows.Close()
	for rows.Next() {
		// The row's text as the driver received it (valid until the next row), or as render
		// wrote it: add copies it into the member, so no row is decoded or copied twice.
		var line []byte
		if k.render != nil {
			if rendered, err = k.render(scan, rows, rendered[:0]); err != nil {
				return rendered, fmt.Errorf("export %s: a %s row: %w", t.ID, k.kind, err)
			}
			line = rendered
		} else if line = rows.RawValues()[0]; line == nil {
			return rendered, fmt.Errorf("export %s: a %s row rendered as NULL", t.ID, k.kind)
		}
		if err := mw.add(line); err != nil {
			return rendered, err
		}
	}
	rows.Close()
	return rendered, rows.Err()
}

// closeArchive writes the manifest, the archive's last member, and closes the tar and gzip
// streams and the last chunk.
func closeArchive(tw *tar.Writer, gz *gzip.Writer, cw *chunkWriter, m *Manifest) error {
	manifest, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	manifest = append(manifest, '\n')
	if err := tw.WriteHeader(&tar.Header{Name: ManifestName, Mode: 0o644, Size: int64(len(manifest)), ModTime: m.CreatedAt, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := tw.Write(manifest); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return cw.flush()
}

// memberWriter cuts one kind's JSON lines into tar members of about memberPartBytes,
// "<kind>/<part>.jsonl", noting each in the manifest.
type memberWriter struct {
	tw       *tar.Writer
	cw       *chunkWriter
	kind     string
	manifest *Manifest
	buf      *bytes.Buffer // the part being cut, empty between parts (shared by the kinds)
	partRows int64
	rows     int64
	part     int
}

func (w *memberWriter) add(line []byte) error {
	w.buf.Write(line)
	w.buf.WriteByte('\n')
	w.partRows++
	w.rows++
	w.cw.rows++
	if w.buf.Len() >= memberPartBytes {
		return w.flush()
	}
	return nil
}

func (w *memberWriter) flush() error {
	if w.partRows == 0 {
		return nil
	}
	w.part++
	name := fmt.Sprintf("%s/%06d.jsonl", w.kind, w.part)
	sum := sha256.Sum256(w.buf.Bytes())
	if err := w.tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(w.buf.Len()), ModTime: w.manifest.CreatedAt, Format: tar.FormatPAX}); err != nil {
		return err
	}
	if _, err := w.tw.Write(w.buf.Bytes()); err != nil {
		return err
	}
	w.manifest.Members = append(w.manifest.Members, ManifestMember{Name: name, Kind: w.kind, Rows: w.partRows,
		Bytes: int64(w.buf.Len()), SHA256: hex.EncodeToString(sum[:])})
	w.buf.Reset()
	w.partRows = 0
	return nil
}

// chunkWriter stores the compressed archive in chunks of ArchiveChunkBytes, hashing it; after
// each chunk it records progress and stops when the export was cancelled.
type chunkWriter struct {
	ctx   context.Context
	pool  *pgxpool.Pool
	id    string
	sum   hash.Hash
	buf   []byte
	seq   int
	total int64
	rows  int64 // rows written so far (for progress)
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if w.buf == nil {
			w.buf = make([]byte, 0, ArchiveChunkBytes)
		}
		k := min(len(p), ArchiveChunkBytes-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		if len(w.buf) == ArchiveChunkBytes {
			if err := w.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	w.sum.Write(w.buf)
	w.total += int64(len(w.buf))
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO transfer_chunks (transfer_id, seq, data) VALUES ($1, $2, $3)`, w.id, w.seq, w.buf)
	progress := b.Queue(`UPDATE transfers SET rows_done = $2, bytes_done = $3, updated_at = now() WHERE id = $1 AND state = 'running'`,
		w.id, w.rows, w.total)
	cancelled := false
	progress.Exec(func(tag pgconn.CommandTag) error {
		cancelled = tag.RowsAffected() == 0
		return nil
	})
	if err := w.pool.SendBatch(w.ctx, b).Close(); err != nil {
		return err
	}
	w.seq++
	w.buf = w.buf[:0]
	if cancelled {
		return errExportCancelled
	}
	return nil
}

// exportDocumentSQL is the archive's row of the settings or the policy (table is
// organization_settings or organization_policies): a document never written (no row) is the
// defaults at version 1, as of the organization's creation (readDocumentSQL).
func exportDocumentSQL(table string) string {
	return `SELECT json_build_object('document', coalesce(d.document, '{}'), 'version', coalesce(d.version, 1),
		'updated_at', coalesce(d.updated_at, o.created_at))::text
		FROM organizations o LEFT JOIN ` + table + ` d ON d.organization_id = o.id WHERE o.id = $1`
}
