package domain

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
)

// IntakeKeyPrefix starts every intake key: renga_intake_[<deployment identifier>_]<secret>.
const IntakeKeyPrefix = "renga_intake_"

// IntakeKey is an organization's key for registering installations (never its secret).
type IntakeKey struct {
	ID             string     `db:"id"`
	OrganizationID string     `db:"organization_id"`
	Name           string     `db:"name"`
	Identifier     *string    `db:"identifier"`
	CreatedAt      time.Time  `db:"created_at"`
	RevokedAt      *time.Time `db:"revoked_at"`
}

const intakeKeyColumns = `id, organization_id, name, identifier, created_at, revoked_at`

// LooksLikeIntakeKey is a cheap syntax check before any database work. The identifier part is
// only checked for shape: authentication never trusts it.
func LooksLikeIntakeKey(s string) bool {
	rest, ok := strings.CutPrefix(s, IntakeKeyPrefix)
	if !ok {
		return false
	}
	if i := strings.LastIndexByte(rest, '_'); i >= 0 {
		id := rest[:i]
		if len(id) < 1 || len(id) > 16 || strings.Trim(id, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return false
		}
		rest = rest[i+1:]
	}
	if len(rest) != 52 {
		return false
	}
	_, err := secretEncoding.DecodeString(rest)
	return err == nil
}

// HashIntakeKey is the stored form of an intake key: the SHA-256 of the key without its
// deployment identifier (renga_intake_<secret>). The identifier is an annotation for resolvers,
// never part of authentication: a key with a wrong or missing identifier and the right secret
// hashes the same, and a wrong secret never does.
func HashIntakeKey(key string) []byte {
	rest := strings.TrimPrefix(key, IntakeKeyPrefix)
	if i := strings.LastIndexByte(rest, '_'); i >= 0 {
		rest = rest[i+1:]
	}
	return HashSecret(IntakeKeyPrefix + rest)
}

// NewIntakeKeySecret returns a new key carrying identifier ("" for none).
func NewIntakeKeySecret(identifier string) string {
	if identifier == "" {
		return IntakeKeyPrefix + NewSecret()
	}
	return IntakeKeyPrefix + identifier + "_" + NewSecret()
}

// CreateIntakeKey creates a key for the organization, carrying the deployment identifier.
func CreateIntakeKey(ctx context.Context, q db.DBTX, orgID, name, identifier string) (IntakeKey, string, error) {
	secret := NewIntakeKeySecret(identifier)
	var ident *string
	if identifier != "" {
		ident = &identifier
	}
	rows, err := q.Query(ctx, `INSERT INTO intake_keys (id, organization_id, name, identifier, key_hash)
		VALUES ($1, $2, $3, $4, $5) RETURNING `+intakeKeyColumns, db.NewID("key"), orgID, name, ident, HashIntakeKey(secret))
	if err != nil {
		return IntakeKey{}, "", err
	}
	k, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[IntakeKey])
	return k, secret, err
}

// ListIntakeKeys pages through an organization's keys, newest first.
func ListIntakeKeys(ctx context.Context, q db.DBTX, orgID, before string, limit int) ([]IntakeKey, error) {
	rows, err := q.Query(ctx, `SELECT `+intakeKeyColumns+` FROM intake_keys WHERE organization_id = $1 AND ($2 = '' OR id < $2)
		ORDER BY id DESC LIMIT $3`, orgID, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[IntakeKey])
}

// RevokeIntakeKey revokes a key; revoking a revoked key changes nothing.
func RevokeIntakeKey(ctx context.Context, q db.DBTX, orgID, id string) (IntakeKey, []string, error) {
	rows, err := q.Query(ctx, `WITH old AS (SELECT revoked_at FROM intake_keys WHERE organization_id = $1 AND id = $2 FOR UPDATE)
		UPDATE intake_keys k SET revoked_at = coalesce(k.revoked_at, now()) FROM old
		WHERE k.organization_id = $1 AND k.id = $2
		RETURNING k.id, k.organization_id, k.name, k.identifier, k.created_at, k.revoked_at, old.revoked_at IS NULL AS changed`, orgID, id)
	if err != nil {
		return IntakeKey{}, nil, err
	}
	type revoked struct {
		IntakeKey
		Changed bool `db:"changed"`
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[revoked])
	if err != nil {
		return IntakeKey{}, nil, db.Translate(err)
	}
	if !r.Changed {
		return r.IntakeKey, nil, nil
	}
	return r.IntakeKey, []string{"intake_keys"}, nil
}

// RotateIntakeKey revokes a live key and creates its successor with the same name, carrying
// the deployment's current identifier.
func RotateIntakeKey(ctx context.Context, q db.DBTX, orgID, id, identifier string) (IntakeKey, string, error) {
	var name string
	err := q.QueryRow(ctx, `UPDATE intake_keys SET revoked_at = now() WHERE organization_id = $1 AND id = $2 AND revoked_at IS NULL
		RETURNING name`, orgID, id).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		var exists bool
		if err := q.QueryRow(ctx, `SELECT true FROM intake_keys WHERE organization_id = $1 AND id = $2`, orgID, id).Scan(&exists); err != nil {
			return IntakeKey{}, "", db.Translate(err)
		}
		return IntakeKey{}, "", ErrInvalidState
	}
	if err != nil {
		return IntakeKey{}, "", err
	}
	return CreateIntakeKey(ctx, q, orgID, name, identifier)
}

// AgentOrg is the organization an agent credential belongs to, as authentication sees it.
type AgentOrg struct {
	ID    string
	Name  string
	State string
}

// IntakeKeyHolder finds an intake key by its stored hash (HashIntakeKey).
func IntakeKeyHolder(ctx context.Context, q db.DBTX, hash []byte) (keyID string, storedHash []byte, org AgentOrg, err error) {
	err = q.QueryRow(ctx, `SELECT k.id, k.key_hash, o.id, o.display_name, o.state FROM intake_keys k
		JOIN organizations o ON o.id = k.organization_id WHERE k.key_hash = $1 AND k.revoked_at IS NULL`, hash).
		Scan(&keyID, &storedHash, &org.ID, &org.Name, &org.State)
	return keyID, storedHash, org, db.Translate(err)
}

// Installation is an agent's registered identity.
type Installation struct {
	ID             string     `db:"id"`
	OrganizationID string     `db:"organization_id"`
	PublicKey      []byte     `db:"public_key"`
	Hostname       string     `db:"hostname"`
	OS             string     `db:"os"`
	RegisteredAt   time.Time  `db:"registered_at"`
	LastSeenAt     *time.Time `db:"last_seen_at"`
}

const installationColumns = `id, organization_id, public_key, hostname, os, registered_at, last_seen_at`

// RegisterInstallation registers an installation, idempotently on its ID: the same ID and key
// return the existing installation (created false). It enforces max_agents, serialized on the
// organization's row so that concurrent registrations cannot exceed it together.
func RegisterInstallation(ctx context.Context, q db.DBTX, orgID, intakeKeyID string, in Installation, defaults PolicyDocument) (Installation, bool, error) {
	existing, err := getInstallation(ctx, q, in.ID)
	switch {
	case err == nil:
		if existing.OrganizationID != orgID || !ed25519.PublicKey(existing.PublicKey).Equal(ed25519.PublicKey(in.PublicKey)) {
			return Installation{}, false, ErrInstallationConflict
		}
		return existing, false, nil
	case !errors.Is(err, db.ErrNotFound):
		return Installation{}, false, err
	}
	o, err := lockOrganization(ctx, q, orgID)
	if err != nil {
		return Installation{}, false, err
	}
	policy, err := GetPolicy(ctx, q, o.ID)
	if err != nil {
		return Installation{}, false, err
	}
	max := Effective(policy.Document, defaults, Settings{}).Limits.MaxAgents.Value
	var count int64
	if err := q.QueryRow(ctx, `SELECT count(*) FROM installations WHERE organization_id = $1`, o.ID).Scan(&count); err != nil {
		return Installation{}, false, err
	}
	if count >= max {
		return Installation{}, false, &LimitError{Limit: "max_agents", Value: max}
	}
	rows, err := q.Query(ctx, `INSERT INTO installations (id, organization_id, public_key, hostname, os, intake_key_id)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING RETURNING `+installationColumns,
		in.ID, o.ID, in.PublicKey, in.Hostname, in.OS, intakeKeyID)
	if err != nil {
		return Installation{}, false, err
	}
	inst, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Installation])
	if errors.Is(err, pgx.ErrNoRows) {
		// Registered concurrently: answer as a retry would.
		if existing, err := getInstallation(ctx, q, in.ID); err == nil && existing.OrganizationID == orgID &&
			ed25519.PublicKey(existing.PublicKey).Equal(ed25519.PublicKey(in.PublicKey)) {
			return existing, false, nil
		}
		return Installation{}, false, ErrInstallationConflict
	}
	return inst, err == nil, err
}

func getInstallation(ctx context.Context, q db.DBTX, id string) (Installation, error) {
	rows, err := q.Query(ctx, `SELECT `+installationColumns+` FROM installations WHERE id = $1`, id)
	if err != nil {
		return Installation{}, err
	}
	inst, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Installation])
	return inst, db.Translate(err)
}

// InstallationHolder is what signature authentication needs, with the day's intake so far and
// the organization's policy, so that intake needs no further read.
type InstallationHolder struct {
	Installation Installation
	Org          AgentOrg
	Policy       PolicyDocument
	IntakeToday  int64
}

// InstallationForAuth reads an installation, its organization, its policy and its intake so
// far today (UTC), in one query.
func InstallationForAuth(ctx context.Context, q db.DBTX, id string) (InstallationHolder, error) {
	var h InstallationHolder
	var policy []byte
	i := &h.Installation
	err := q.QueryRow(ctx, `SELECT i.id, i.organization_id, i.public_key, i.hostname, i.os, i.registered_at, i.last_seen_at,
			o.display_name, o.state, coalesce(p.document, '{}'),
			(SELECT coalesce(sum(c.intake_bytes), 0)::bigint FROM usage_counters c
			  WHERE c.organization_id = i.organization_id AND c.day = (now() AT TIME ZONE 'UTC')::date)
		FROM installations i JOIN organizations o ON o.id = i.organization_id
		LEFT JOIN organization_policies p ON p.organization_id = i.organization_id
		WHERE i.id = $1`, id).Scan(&i.ID, &i.OrganizationID, &i.PublicKey, &i.Hostname, &i.OS, &i.RegisteredAt, &i.LastSeenAt,
		&h.Org.Name, &h.Org.State, &policy, &h.IntakeToday)
	if err != nil {
		return h, db.Translate(err)
	}
	h.Org.ID = i.OrganizationID
	return h, json.Unmarshal(policy, &h.Policy)
}

// ObservationBatchDedupWindow is how long a batch ID is remembered.
const ObservationBatchDedupWindow = 30 * 24 * time.Hour

// AcceptBatch stores a batch of observations once per (installation, batch ID) and counts the
// request and its bytes in usage, in one statement: the deduplication log is what makes both
// exactly once. It reports whether the batch was new.
func AcceptBatch(ctx context.Context, q db.DBTX, orgID, installationID, batchID string, observations json.RawMessage, bytes int64) (bool, error) {
	var n int
	err := q.QueryRow(ctx, `WITH batch AS (
			INSERT INTO observation_batches (installation_id, batch_id, organization_id) VALUES ($2, $3, $1)
			ON CONFLICT DO NOTHING RETURNING 1),
		stored AS (
			INSERT INTO observations (organization_id, installation_id, batch_id, observed_at, kind, data)
			SELECT $1, $2, $3, (o->>'observed_at')::timestamptz, o->>'kind', o->'data'
			FROM batch, jsonb_array_elements($4::jsonb) o),
		counted AS (
			INSERT INTO usage_counters AS c (organization_id, day, shard, intake_requests, intake_bytes)
			SELECT $1, (now() AT TIME ZONE 'UTC')::date, $6, 1, $5 FROM batch
			ON CONFLICT (organization_id, day, shard) DO UPDATE SET
				intake_requests = c.intake_requests + 1, intake_bytes = c.intake_bytes + excluded.intake_bytes),
		seen AS (
			UPDATE installations SET last_seen_at = now()
			WHERE id = $2 AND (last_seen_at IS NULL OR last_seen_at < now() - interval '1 minute'))
		SELECT count(*) FROM batch`,
		orgID, installationID, batchID, observations, bytes, usageShard(installationID+"\x00"+batchID)).Scan(&n)
	return n == 1, err
}

// ListInstallations pages through an organization's installations in ID order.
func ListInstallations(ctx context.Context, q db.DBTX, orgID, after string, limit int) ([]Installation, error) {
	rows, err := q.Query(ctx, `SELECT `+installationColumns+` FROM installations WHERE organization_id = $1 AND id > $2
		ORDER BY id LIMIT $3`, orgID, after, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Installation])
}

// Observation is one stored observation.
type Observation struct {
	ID             int64           `db:"id"`
	InstallationID string          `db:"installation_id"`
	BatchID        string          `db:"batch_id"`
	ObservedAt     time.Time       `db:"observed_at"`
	ReceivedAt     time.Time       `db:"received_at"`
	Kind           string          `db:"kind"`
	Data           json.RawMessage `db:"data"`
}

// ListObservations pages through an installation's observations, newest first.
func ListObservations(ctx context.Context, q db.DBTX, orgID, installationID string, before int64, limit int) ([]Observation, error) {
	inst, err := getInstallation(ctx, q, installationID)
	if err != nil || inst.OrganizationID != orgID {
		return nil, db.ErrNotFound
	}
	rows, err := q.Query(ctx, `SELECT id, installation_id, batch_id, observed_at, received_at, kind, data FROM observations
		WHERE installation_id = $1 AND ($2 = 0 OR id < $2) ORDER BY id DESC LIMIT $3`, installationID, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Observation])
}

// FormatObservationID is an observation's ID as the API shows it.
func FormatObservationID(id int64) string { return "obs_" + strconv.FormatInt(id, 10) }

// PurgeOldObservations deletes observations older than each organization's effective
// observation_retention_days, and batch IDs older than the deduplication window, in batches.
func PurgeOldObservations(ctx context.Context, q db.DBTX, defaults PolicyDocument, now time.Time) (int64, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT o.organization_id, coalesce(p.document, '{}')
		FROM (SELECT DISTINCT organization_id FROM installations) o
		LEFT JOIN organization_policies p ON p.organization_id = o.organization_id`)
	if err != nil {
		return 0, err
	}
	type orgPolicy struct {
		id  string
		doc PolicyDocument
	}
	var orgs []orgPolicy
	for rows.Next() {
		var op orgPolicy
		var raw []byte
		if err := rows.Scan(&op.id, &raw); err != nil {
			rows.Close()
			return 0, err
		}
		if err := json.Unmarshal(raw, &op.doc); err != nil {
			rows.Close()
			return 0, err
		}
		orgs = append(orgs, op)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	var total int64
	deleteAll := func(sql string, args ...any) error {
		for {
			tag, err := q.Exec(ctx, sql, args...)
			if err != nil {
				return err
			}
			total += tag.RowsAffected()
			if tag.RowsAffected() < 5000 {
				return nil
			}
		}
	}
	for _, o := range orgs {
		days := Effective(o.doc, defaults, Settings{}).Limits.ObservationRetentionDays.Value
		cutoff := now.Add(-time.Duration(days) * 24 * time.Hour)
		if err := deleteAll(`DELETE FROM observations WHERE id = ANY (ARRAY(
			SELECT id FROM observations WHERE organization_id = $1 AND received_at < $2 LIMIT 5000))`, o.id, cutoff); err != nil {
			return total, err
		}
	}
	err = deleteAll(`DELETE FROM observation_batches WHERE ctid = ANY (ARRAY(
		SELECT ctid FROM observation_batches WHERE received_at < $1 LIMIT 5000))`, now.Add(-ObservationBatchDedupWindow))
	return total, err
}

// IntakeTodayLocked serializes the organization's intake for the rest of the transaction and
// returns its intake bytes so far today, as committed by every batch before: the exact check
// of intake_bytes_per_day near the limit. The read is its own statement after the lock.
func IntakeTodayLocked(ctx context.Context, tx pgx.Tx, orgID string) (int64, error) {
	batch := &pgx.Batch{}
	batch.Queue(`SELECT pg_advisory_xact_lock(hashtextextended('intake:' || $1, 0))`, orgID)
	batch.Queue(`SELECT coalesce(sum(intake_bytes), 0)::bigint FROM usage_counters
		WHERE organization_id = $1 AND day = (now() AT TIME ZONE 'UTC')::date`, orgID)
	br := tx.SendBatch(ctx, batch)
	defer func() { _ = br.Close() }()
	if _, err := br.Exec(); err != nil {
		return 0, err
	}
	var n int64
	if err := br.QueryRow().Scan(&n); err != nil {
		return 0, err
	}
	return n, br.Close()
}

// BatchSeen reports whether a batch was accepted before.
func BatchSeen(ctx context.Context, q db.DBTX, installationID, batchID string) (bool, error) {
	var seen bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM observation_batches WHERE installation_id = $1 AND batch_id = $2)`,
		installationID, batchID).Scan(&seen)
	return seen, err
}

// SignatureSkew is how far a signed request's timestamp may be from the server's clock.
const SignatureSkew = 5 * time.Minute

// StringToSign is what an installation signs (see the installationSignature security scheme in
// openapi.yaml): six lines joined by "\n".
func StringToSign(method, requestTarget, timestamp, installationID string, body []byte) string {
	digest := sha256.Sum256(body)
	return strings.Join([]string{"renga-request-v1", method, requestTarget, timestamp, installationID, hex.EncodeToString(digest[:])}, "\n")
}
