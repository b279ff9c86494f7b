package domain

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"renga.dev/renga/server/db"
)

// The rows of an archive's members, as an import reads and writes them at the destination.

// importedJobResult is the result a job gets when it had not completed at the source: an
// imported job never runs.
const importedJobResult = `{"status": "failed", "output": "not run: imported from another deployment"}`

// badRowError is a row the archive's format does not allow.
type badRowError struct{ err error }

func (e *badRowError) Error() string { return e.err.Error() }

func bad(format string, args ...any) error { return &badRowError{fmt.Errorf(format, args...)} }

// rowsOf decodes every row of a member into T and hands each to fn.
func rowsOf[T any](rows *rowReader, fn func(T) error) (int64, error) {
	var n int64
	for {
		var v T
		ok, err := rows.next(&v)
		if !ok {
			return n, err
		}
		if err := fn(v); err != nil {
			return n, err
		}
		n++
	}
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
func (im *importer) load(kind string, rows *rowReader) (int64, error) {
	switch kind {
	case "organization":
		// The destination keeps its own ID, slug and display name.
		return rowsOf(rows, func(ManifestOrg) error { return nil })
	case "settings":
		return rowsOf(rows, im.settings)
	case "policy":
		return rowsOf(rows, im.policy)
	case "identity_providers":
		return rowsOf(rows, im.provider)
	case "users":
		return rowsOf(rows, im.user)
	case "memberships":
		return rowsOf(rows, im.membership)
	case "installations":
		return rowsOf(rows, im.installation)
	case "observation_batches":
		return copyRows(im, rows, "observation_batches", []string{"installation_id", "batch_id", "organization_id", "received_at"}, im.batch)
	case "observations":
		next, err := im.observationIDs()
		if err != nil {
			return 0, err
		}
		return copyRows(im, rows, "observations", []string{"id", "organization_id", "installation_id", "batch_id", "observed_at", "received_at", "kind", "data"},
			func(r observationRow) ([]any, error) { return im.observation(r, next()) })
	case "jobs":
		return copyRows(im, rows, "jobs", []string{"id", "organization_id", "installation_id", "command", "state", "created_at", "delivered_at", "completed_at", "result"}, im.job)
	}
	return 0, bad("unknown kind %q", kind)
}

func (im *importer) settings(r documentRow) error {
	var doc map[string]any
	if json.Unmarshal(r.Document, &doc) != nil || doc == nil {
		return bad("settings: not a JSON object")
	}
	_, err := im.tx.Exec(im.ctx, importDocument("organization_settings"), im.orgID, string(r.Document))
	return err
}

func (im *importer) policy(r documentRow) error {
	doc, err := decodePolicy(r.Document, true)
	if err == nil {
		err = doc.Validate()
	}
	if err != nil {
		return bad("policy: %v", err)
	}
	_, err = im.tx.Exec(im.ctx, importDocument("organization_policies"), im.orgID, string(r.Document))
	return err
}

func (im *importer) provider(r providerRow) error {
	in, reason, err := importedProvider(r)
	if err != nil {
		return bad("identity provider %q: %v", r.ID, err)
	}
	// Disabled, with no secret: see importedProvider.
	_, err = im.tx.Exec(im.ctx, `INSERT INTO organization_identity_providers (id, organization_id, slug, protocol, issuer,
			display_name, client_id, scopes, allowed_email_domains, state, disabled_reason, disabled_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'disabled', $10, coalesce($11, now()), $12)`,
		db.NewID("oip"), im.orgID, in.Slug, in.Protocol, in.Issuer, in.DisplayName, in.ClientID, in.Scopes,
		in.AllowedEmailDomains, reason, r.DisabledAt, r.CreatedAt)
	return err
}

func (im *importer) user(r userRow) error {
	email := NormalizeEmail(r.Email)
	// The ID is kept for the memberships (im.users): an export's are db.NewID's.
	if CheckEmail(email) != nil || r.ID == "" || len(r.ID) > maxSourceIDBytes || r.DisplayName == "" {
		return bad("user %.64q: needs an ID, a plain email address and a display name", r.ID)
	}
	// Matched by email: a user this deployment knows is the same person.
	var id string
	err := im.tx.QueryRow(im.ctx, `INSERT INTO users (id, email, display_name) VALUES ($1, $2, $3)
		ON CONFLICT (email) DO UPDATE SET email = users.email RETURNING id`, db.NewID("usr"), email, r.DisplayName).Scan(&id)
	im.users[r.ID] = id
	return err
}

func (im *importer) membership(r membershipRow) error {
	user, ok := im.users[r.UserID]
	if !ok || r.Role == "" {
		return bad("membership of unknown user %q", r.UserID)
	}
	// Pending: it grants nothing until the owner is invited again and accepts.
	_, err := im.tx.Exec(im.ctx, `INSERT INTO pending_memberships (organization_id, user_id, role, source_created_at)
		VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`, im.orgID, user, r.Role, r.CreatedAt)
	return err
}

func (im *importer) installation(r installationRow) error {
	key, err := base64.StdEncoding.DecodeString(r.PublicKey)
	if err != nil || len(key) != 32 || !installationIDPattern.MatchString(r.ID) {
		return bad("installation %q: needs an installation ID and a 32-byte public key", r.ID)
	}
	if im.installations[r.ID] {
		return bad("installation %q twice", r.ID)
	}
	im.installations[r.ID] = true
	// The same identity and key: the agent continues here. No intake key comes with it.
	_, err = im.tx.Exec(im.ctx, `INSERT INTO installations (id, organization_id, public_key, hostname, os, registered_at, last_seen_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, r.ID, im.orgID, key, r.Hostname, r.OS, r.RegisteredAt, r.LastSeenAt)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == pgerrcode.UniqueViolation && pgErr.ConstraintName == "installations_pkey" {
		return ErrInstallationsHere
	}
	return err
}

func (im *importer) batch(r batchRow) ([]any, error) {
	if !im.installations[r.InstallationID] {
		return nil, bad("batch of unknown installation %q", r.InstallationID)
	}
	return []any{r.InstallationID, r.BatchID, im.orgID, r.ReceivedAt}, nil
}

func (im *importer) observation(r observationRow, id ObservationID) ([]any, error) {
	if !im.installations[r.InstallationID] || len(r.Data) == 0 {
		return nil, bad("observation of unknown installation %q, or without data", r.InstallationID)
	}
	return []any{[16]byte(id), im.orgID, r.InstallationID, r.BatchID, r.ObservedAt, r.ReceivedAt, r.Kind, string(r.Data)}, nil
}

// observationIDs gives the observations of the member being read their IDs: an archive carries
// none, and an import's observations are one batch received when the import began, whose random
// bits the database draws once (observation_id in migration 00020): the k-th observation of the
// archive is the first's plus k, so they keep the archive's order.
func (im *importer) observationIDs() (func() ObservationID, error) {
	if im.obsBase == nil {
		var base ObservationID
		if err := im.tx.QueryRow(im.ctx, `SELECT observation_id(now(), 0, `+observationRandom+`, 0)`).Scan(&base); err != nil {
			return nil, err
		}
		im.obsBase = &base
	}
	id, k := *im.obsBase, uint64(im.counts["observations"])
	first := binary.BigEndian.Uint64(id[8:])
	return func() ObservationID {
		binary.BigEndian.PutUint64(id[8:], first+k)
		k++
		return id
	}, nil
}

func (im *importer) job(r jobRow) ([]any, error) {
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
	return []any{r.ID, im.orgID, r.InstallationID, r.Command, r.State, r.CreatedAt, r.DeliveredAt, r.CompletedAt, result}, nil
}

// copyRows streams a member's rows into table with COPY.
func copyRows[T any](im *importer, rows *rowReader, table string, columns []string, values func(T) ([]any, error)) (int64, error) {
	src := &jsonRows[T]{rows: rows, values: values}
	n, err := im.tx.CopyFrom(im.ctx, pgx.Identifier{table}, columns, src)
	if src.err != nil { // the archive's fault, not the database's
		return n, src.err
	}
	return n, err
}

// jsonRows is a COPY source over a member's rows.
type jsonRows[T any] struct {
	rows   *rowReader
	values func(T) ([]any, error)
	row    []any
	err    error
}

func (s *jsonRows[T]) Next() bool {
	if s.err != nil {
		return false
	}
	var v T
	ok, err := s.rows.next(&v)
	if !ok {
		s.err = err
		return false
	}
	s.row, s.err = s.values(v)
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
