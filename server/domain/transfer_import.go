package domain

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"regexp"
	"slices"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/klauspost/compress/gzip"

	"renga.dev/renga/server/db"
)

// maxManifestBytes bounds the one member read whole.
const maxManifestBytes = 64 << 20

var memberName = regexp.MustCompile(`^([a-z_]+)/([0-9]{6})\.jsonl$`)

// importedJobResult is the result a job gets when it had not completed at the source: an
// imported job never runs.
const importedJobResult = `{"status": "failed", "output": "not run: imported from another deployment"}`

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
	kindIndex     int   // the kind being read; members come in ArchiveKinds order
	formatErr     error // the first malformed member; reported after the manifest's version and checksums
}

func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrArchiveCorrupt, fmt.Sprintf(format, args...))
}

func (im *importer) read(body io.Reader) error {
	gz, err := gzip.NewReader(body)
	if err != nil {
		return corrupt("not gzip-compressed")
	}
	tr := tar.NewReader(gz)
	var manifest *Manifest
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return corrupt("tar: %v", err)
		}
		if manifest != nil {
			return corrupt("a member after the manifest")
		}
		if hdr.Name == ManifestName {
			raw, err := io.ReadAll(io.LimitReader(tr, maxManifestBytes+1))
			if err != nil {
				return corrupt("manifest: %v", err)
			}
			if len(raw) > maxManifestBytes {
				return corrupt("manifest too large")
			}
			manifest = &Manifest{}
			if err := json.Unmarshal(raw, manifest); err != nil {
				return corrupt("manifest: %v", err)
			}
			continue
		}
		if err := im.member(hdr, tr); err != nil {
			return err
		}
	}
	// The rest of the stream, so that gzip checks its CRC and length.
	if _, err := io.Copy(io.Discard, gz); err != nil {
		return corrupt("gzip: %v", err)
	}
	if manifest == nil {
		return corrupt("no manifest")
	}
	if manifest.FormatVersion < 1 || manifest.FormatVersion > ArchiveFormatVersion {
		return fmt.Errorf("%w: %d", ErrArchiveVersion, manifest.FormatVersion)
	}
	return im.verify(manifest)
}

// verify holds what was read to the manifest: every listed member present with its SHA-256
// and rows, nothing unlisted, and the counts per kind. A missing or altered member is named
// as such before the malformed rows it may have caused.
func (im *importer) verify(m *Manifest) error {
	listed := map[string]bool{}
	for _, want := range m.Members {
		listed[want.Name] = true
		if _, ok := im.seen[want.Name]; !ok {
			return fmt.Errorf("%w: %s", ErrArchiveMemberMissing, want.Name)
		}
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
		if got := im.seen[want.Name]; got.Rows != want.Rows || got.Kind != want.Kind {
			return corrupt("%s: %d rows of %s, the manifest says %d of %s", want.Name, got.Rows, got.Kind, want.Rows, want.Kind)
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
// still read, so that an archive of another format version says so).
func (im *importer) member(hdr *tar.Header, tr io.Reader) error {
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
	default:
		im.kindIndex = idx
		m.Kind = kinds[idx]
		dec := json.NewDecoder(r)
		dec.UseNumber()
		rows, err := im.load(m.Kind, dec)
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
		return corrupt("%s: %v", hdr.Name, err)
	}
	m.SHA256 = hex.EncodeToString(h.Sum(nil))
	m.Bytes = r.n
	im.seen[hdr.Name] = m
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

// badRowError is a row the archive's format does not allow.
type badRowError struct{ err error }

func (e *badRowError) Error() string { return e.err.Error() }

func bad(format string, args ...any) error { return &badRowError{fmt.Errorf(format, args...)} }

// rowsOf decodes every JSON document of a member into T and hands each to fn.
func rowsOf[T any](dec *json.Decoder, fn func(T) error) (int64, error) {
	var n int64
	for dec.More() {
		var v T
		if err := dec.Decode(&v); err != nil {
			return n, bad("row %d: %v", n+1, err)
		}
		if err := fn(v); err != nil {
			return n, err
		}
		n++
	}
	// dec.More is false at the end or at a stray delimiter: only the end is allowed.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return n, bad("after row %d: not one JSON document per line", n)
	}
	return n, nil
}

type documentRow struct {
	Document json.RawMessage `json:"document"`
}

// providerRow is an organization identity provider as the archive holds it: without its client
// secret (has_client_secret says whether it had one at the source).
type providerRow struct {
	ID                  string     `json:"id"`
	Slug                string     `json:"slug"`
	Protocol            string     `json:"protocol"`
	Issuer              string     `json:"issuer"`
	DisplayName         string     `json:"display_name"`
	ClientID            string     `json:"client_id"`
	Scopes              []string   `json:"scopes"`
	AllowedEmailDomains []string   `json:"allowed_email_domains"`
	HasClientSecret     bool       `json:"has_client_secret"`
	State               string     `json:"state"`
	DisabledReason      *string    `json:"disabled_reason"`
	DisabledAt          *time.Time `json:"disabled_at"`
	CreatedAt           time.Time  `json:"created_at"`
}

type userRow struct {
	ID          string `json:"id"`
	Email       string `json:"email"`
	DisplayName string `json:"display_name"`
}

type membershipRow struct {
	UserID    string    `json:"user_id"`
	Role      string    `json:"role"`
	CreatedAt time.Time `json:"created_at"`
}

type installationRow struct {
	ID           string     `json:"id"`
	PublicKey    string     `json:"public_key"`
	Hostname     string     `json:"hostname"`
	OS           string     `json:"os"`
	RegisteredAt time.Time  `json:"registered_at"`
	LastSeenAt   *time.Time `json:"last_seen_at"`
}

type batchRow struct {
	InstallationID string    `json:"installation_id"`
	BatchID        string    `json:"batch_id"`
	ReceivedAt     time.Time `json:"received_at"`
}

type observationRow struct {
	InstallationID string          `json:"installation_id"`
	BatchID        string          `json:"batch_id"`
	ObservedAt     time.Time       `json:"observed_at"`
	ReceivedAt     time.Time       `json:"received_at"`
	Kind           string          `json:"kind"`
	Data           json.RawMessage `json:"data"`
}

type jobRow struct {
	ID             string          `json:"id"`
	InstallationID string          `json:"installation_id"`
	Command        string          `json:"command"`
	State          string          `json:"state"`
	CreatedAt      time.Time       `json:"created_at"`
	DeliveredAt    *time.Time      `json:"delivered_at"`
	CompletedAt    *time.Time      `json:"completed_at"`
	Result         json.RawMessage `json:"result"`
}

var installationIDPattern = regexp.MustCompile(`^ins_[0-9a-z]{26}$`)

// load writes one member's rows of kind at the destination.
func (im *importer) load(kind string, dec *json.Decoder) (int64, error) {
	ctx, tx, org := im.ctx, im.tx, im.orgID
	switch kind {
	case "organization":
		// The destination keeps its own ID, slug and display name.
		return rowsOf(dec, func(ManifestOrg) error { return nil })
	case "settings":
		return rowsOf(dec, func(r documentRow) error {
			var doc map[string]any
			if json.Unmarshal(r.Document, &doc) != nil || doc == nil {
				return bad("settings: not a JSON object")
			}
			_, err := tx.Exec(ctx, importDocument("organization_settings"), org, string(r.Document))
			return err
		})
	case "policy":
		return rowsOf(dec, func(r documentRow) error {
			doc, err := decodePolicy(r.Document, true)
			if err == nil {
				err = doc.Validate()
			}
			if err != nil {
				return bad("policy: %v", err)
			}
			_, err = tx.Exec(ctx, importDocument("organization_policies"), org, string(r.Document))
			return err
		})
	case "identity_providers":
		return rowsOf(dec, func(r providerRow) error {
			in, reason, err := importedProvider(r)
			if err != nil {
				return bad("identity provider %q: %v", r.ID, err)
			}
			// Disabled, with no secret: see importedProvider.
			_, err = tx.Exec(ctx, `INSERT INTO organization_identity_providers (id, organization_id, slug, protocol, issuer,
					display_name, client_id, scopes, allowed_email_domains, state, disabled_reason, disabled_at, created_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'disabled', $10, coalesce($11, now()), $12)`,
				db.NewID("oip"), org, in.Slug, in.Protocol, in.Issuer, in.DisplayName, in.ClientID, in.Scopes,
				in.AllowedEmailDomains, reason, r.DisabledAt, r.CreatedAt)
			return err
		})
	case "users":
		return rowsOf(dec, func(r userRow) error {
			email := NormalizeEmail(r.Email)
			if CheckEmail(email) != nil || r.ID == "" || r.DisplayName == "" {
				return bad("user %q: needs an ID, a plain email address and a display name", r.ID)
			}
			// Matched by email: a user this deployment knows is the same person.
			var id string
			err := tx.QueryRow(ctx, `INSERT INTO users (id, email, display_name) VALUES ($1, $2, $3)
				ON CONFLICT (email) DO UPDATE SET email = users.email RETURNING id`, db.NewID("usr"), email, r.DisplayName).Scan(&id)
			im.users[r.ID] = id
			return err
		})
	case "memberships":
		return rowsOf(dec, func(r membershipRow) error {
			user, ok := im.users[r.UserID]
			if !ok || r.Role == "" {
				return bad("membership of unknown user %q", r.UserID)
			}
			// Pending: it grants nothing until the owner is invited again and accepts.
			_, err := tx.Exec(ctx, `INSERT INTO pending_memberships (organization_id, user_id, role, source_created_at)
				VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, org, user, r.Role, r.CreatedAt)
			return err
		})
	case "installations":
		return rowsOf(dec, func(r installationRow) error {
			key, err := base64.StdEncoding.DecodeString(r.PublicKey)
			if err != nil || len(key) != 32 || !installationIDPattern.MatchString(r.ID) {
				return bad("installation %q: needs an installation ID and a 32-byte public key", r.ID)
			}
			if im.installations[r.ID] {
				return bad("installation %q twice", r.ID)
			}
			im.installations[r.ID] = true
			// The same identity and key: the agent continues here. No intake key comes with it.
			_, err = tx.Exec(ctx, `INSERT INTO installations (id, organization_id, public_key, hostname, os, registered_at, last_seen_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7)`, r.ID, org, key, r.Hostname, r.OS, r.RegisteredAt, r.LastSeenAt)
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "installations_pkey" {
				return ErrInstallationsHere
			}
			return err
		})
	case "observation_batches":
		return copyRows(im, dec, "observation_batches", []string{"installation_id", "batch_id", "organization_id", "received_at"},
			func(r batchRow) ([]any, error) {
				if !im.installations[r.InstallationID] {
					return nil, bad("batch of unknown installation %q", r.InstallationID)
				}
				return []any{r.InstallationID, r.BatchID, org, r.ReceivedAt}, nil
			})
	case "observations":
		return copyRows(im, dec, "observations", []string{"organization_id", "installation_id", "batch_id", "observed_at", "received_at", "kind", "data"},
			func(r observationRow) ([]any, error) {
				if !im.installations[r.InstallationID] || len(r.Data) == 0 {
					return nil, bad("observation of unknown installation %q, or without data", r.InstallationID)
				}
				return []any{org, r.InstallationID, r.BatchID, r.ObservedAt, r.ReceivedAt, r.Kind, string(r.Data)}, nil
			})
	case "jobs":
		return copyRows(im, dec, "jobs", []string{"id", "organization_id", "installation_id", "command", "state", "created_at", "delivered_at", "completed_at", "result"},
			func(r jobRow) ([]any, error) {
				if !im.installations[r.InstallationID] || r.ID == "" {
					return nil, bad("job %q of unknown installation %q", r.ID, r.InstallationID)
				}
				var result any
				if len(r.Result) > 0 && string(r.Result) != "null" {
					result = string(r.Result)
				}
				switch r.State {
				case "succeeded", "failed":
				case "queued", "delivered":
					// Historical only: a job that had not completed never runs here.
					now := time.Now()
					r.State, r.CompletedAt, result = "failed", &now, importedJobResult
				default:
					return nil, bad("job %q: state %q", r.ID, r.State)
				}
				return []any{r.ID, org, r.InstallationID, r.Command, r.State, r.CreatedAt, r.DeliveredAt, r.CompletedAt, result}, nil
			})
	}
	return 0, bad("unknown kind %q", kind)
}

// copyRows streams a member's rows into table with COPY.
func copyRows[T any](im *importer, dec *json.Decoder, table string, columns []string, values func(T) ([]any, error)) (int64, error) {
	src := &jsonRows[T]{dec: dec, values: values}
	n, err := im.tx.CopyFrom(im.ctx, pgx.Identifier{table}, columns, src)
	if src.err != nil { // the archive's fault, not the database's
		return n, src.err
	}
	return n, err
}

// jsonRows is a COPY source over a member's JSON documents.
type jsonRows[T any] struct {
	dec    *json.Decoder
	values func(T) ([]any, error)
	row    []any
	n      int64
	err    error
}

func (s *jsonRows[T]) Next() bool {
	if s.err != nil {
		return false
	}
	if !s.dec.More() {
		if _, err := s.dec.Token(); !errors.Is(err, io.EOF) {
			s.err = bad("after row %d: not one JSON document per line", s.n)
		}
		return false
	}
	var v T
	if err := s.dec.Decode(&v); err != nil {
		s.err = bad("row %d: %v", s.n+1, err)
		return false
	}
	s.row, s.err = s.values(v)
	s.n++
	return s.err == nil
}

func (s *jsonRows[T]) Values() ([]any, error) { return s.row, nil }
func (s *jsonRows[T]) Err() error             { return s.err }

// importDocument is the statement that stores an imported settings or policy document (table
// is organization_settings or organization_policies) one version on from the destination's:
// its row's next version, or version 2 where the destination never wrote it (no row: the
// defaults, version 1).
func importDocument(table string) string {
	return `INSERT INTO ` + table + ` AS d (organization_id, document, version) VALUES ($1, $2, 2)
		ON CONFLICT (organization_id) DO UPDATE SET document = excluded.document, version = d.version + 1, updated_at = now()`
}
