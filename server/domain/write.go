package domain

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"renga.dev/renga/server/db"
)

// Every write through the API starts with BeginWrite and ends with FinishWrite, in one
// transaction around the handler (db.WithWriteTx): BeginWrite's statements travel with the
// transaction's BEGIN, FinishWrite's with its COMMIT, each one pipelined round trip. An
// operator's write whose handler reads nothing (x-renga-one-round-trip: a create) sends
// everything in one round trip instead: QueueWriteChecks, the handler's deferred statements and
// FinishWrite's, one implicit transaction.

// Writer is who writes: what BeginWrite re-checks and holds until commit.
type Writer struct {
	ActorType      string // ActorOperatorToken, ActorUser, ActorIntakeKey, ActorInstallation, ...
	CredentialID   string // the token or key the request authenticated with
	OrganizationID string // a member's or agent's own organization
	// ChangesOwnCredential: the write revokes its own credential, so it takes the credential's
	// lock exclusively from the start (upgrading a shared lock would deadlock).
	ChangesOwnCredential bool
}

// IdempotencyKey is one stored result's identity: the namespace (credential, method, route),
// the key's hash and the digest of the normalized request.
type IdempotencyKey struct {
	ActorID, Method, Route string
	KeyHash, Digest        []byte
}

// StoredResult is a completed response kept under an Idempotency-Key.
type StoredResult struct {
	Digest  []byte
	Status  int
	Headers map[string]string
	Body    []byte
	Expires time.Time
}

// WriteStart is what BeginWrite learned.
type WriteStart struct {
	// Stored is the result stored under the request's key, if any: the caller replays it (same
	// digest) or refuses the request (another digest), and changes nothing.
	Stored *StoredResult
	// Now is the transaction's now() (what a column's DEFAULT now() stores), read with an
	// operator token's re-check; zero for other writers.
	Now time.Time
	// CredentialChecked: the re-check found the credential usable, even when a later step of the
	// first round trip failed (the key's lock past the request's deadline).
	CredentialChecked bool
}

// BeginWrite opens a write in tx, in one round trip. It re-checks the caller's credential and
// holds it until commit, so a revocation cannot commit in between and the write still land
// (ErrCredentialGone). For a member or an agent it holds the organization's row and refuses the
// write unless the organization is active (ErrSuspended, ErrMoved), or an agent's while an
// export for a move froze them (ErrMoving). For a keyed request it takes
// the key's transaction-scoped advisory lock (a concurrent duplicate waits for the first to
// commit or roll back) and then reads the stored result. The read is its own statement after
// the lock: a statement's snapshot is taken when it starts, so reading in the locking statement
// would miss a row committed while it waited.
func BeginWrite(ctx context.Context, tx pgx.Tx, w Writer, k *IdempotencyKey) (WriteStart, error) {
	var start WriteStart
	batch := &pgx.Batch{}
	queueWriterCheck(batch, w)
	if k != nil {
		batch.Queue(`SELECT pg_advisory_xact_lock($1)`, k.lockKey())
		batch.Queue(`SELECT request_digest, status, headers, body, expires_at FROM idempotency_keys
			WHERE actor_id = $1 AND method = $2 AND route = $3 AND key_hash = $4 AND expires_at > now()`,
			k.ActorID, k.Method, k.Route, k.KeyHash)
	}
	if batch.Len() == 0 {
		return start, nil
	}
	br := tx.SendBatch(ctx, batch)
	defer func() { _ = br.Close() }()
	var err error
	if start.Now, err = readWriterCheck(br, w); err != nil {
		return start, err
	}
	start.CredentialChecked = true
	if k == nil {
		return start, br.Close()
	}
	if _, err := br.Exec(); err != nil { // the key's lock
		return start, err
	}
	var s StoredResult
	var headers []byte
	err = br.QueryRow().Scan(&s.Digest, &s.Status, &headers, &s.Body, &s.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return start, br.Close()
	}
	if err != nil {
		return start, err
	}
	if err := json.Unmarshal(headers, &s.Headers); err != nil {
		return start, err
	}
	start.Stored = &s
	return start, br.Close()
}

// queueWriterCheck queues the statements that re-check and hold the writer's credential and, for
// a member or an agent, its organization; readWriterCheck reads their results in order.
func queueWriterCheck(batch *pgx.Batch, w Writer) {
	switch w.ActorType {
	case ActorOperatorToken:
		// A write holds its token's advisory lock, shared, until it commits; a revocation takes
		// it exclusively (RevokeToken), so it waits for writes in flight and writes after it see
		// it. (An advisory lock, not a row lock: many writes of one token would otherwise each
		// write a row lock to the token's row.) The check reads after the lock.
		batch.Queue(tokenLockSQL(w), TokenLockKey(w.CredentialID))
		batch.Queue(`SELECT count(*), now() FROM operator_tokens WHERE id = $1 AND revoked_at IS NULL
			AND (expires_at IS NULL OR expires_at > now())`, w.CredentialID)
	case ActorUser, ActorIntakeKey, ActorInstallation:
		// A member's or agent's write needs the organization active until commit: holding its
		// row, first, makes a suspension, deletion or purge wait for the write, or the write see
		// it (and keeps the lock order: organization, then what belongs to it). Members' writes
		// and registrations are few and some lock the row for update themselves (limits): they
		// take that lock now, since upgrading a shared lock would deadlock. An installation's
		// job traffic shares it (intake holds it in its own statement: SubmitBatch).
		mode := "FOR NO KEY UPDATE"
		if w.ActorType == ActorInstallation {
			mode = "FOR SHARE"
		}
		batch.Queue(`SELECT state, moving_transfer_id IS NOT NULL FROM organizations WHERE id = $1 `+mode, w.OrganizationID)
		switch w.ActorType {
		case ActorUser:
			batch.Queue(`SELECT count(*) FROM (SELECT 1 FROM user_api_keys WHERE id = $1 AND revoked_at IS NULL FOR SHARE) t`, w.CredentialID)
		case ActorIntakeKey:
			batch.Queue(`SELECT count(*) FROM (SELECT 1 FROM intake_keys WHERE id = $1 AND revoked_at IS NULL FOR SHARE) t`, w.CredentialID)
		}
	}
}

// tokenLockSQL takes an operator token's advisory lock for w's write: shared, or exclusive for a
// write that changes its own token.
func tokenLockSQL(w Writer) string {
	if w.ChangesOwnCredential {
		return `SELECT pg_advisory_xact_lock($1)`
	}
	return `SELECT pg_advisory_xact_lock_shared($1)`
}

// QueueWriteChecks queues, first on the one batch of a write sent in one round trip (an
// operator's write whose handler reads nothing and defers its statements: x-renga-one-round-trip),
// what BeginWrite checks, as statements that fail the batch where BeginWrite reads: the token's
// lock, then its re-check (revoked or expired: refused), then the key's lock, then no result
// stored under the key (one there: refused). A check that does not pass raises
// writeCheckRefused (the write_check function, migration 00019): the batch is one implicit
// transaction, so a refused check leaves nothing, and the statements after a check run only
// when it passed. WriteChecksRefused tells such a refusal from any other failure; the caller
// then writes the two-round-trip way (BeginWrite), which answers what was refused (the token
// gone, a replay, a key reused). Only an operator token's writes have these checks.
func QueueWriteChecks(batch *pgx.Batch, w Writer, k *IdempotencyKey) error {
	if w.ActorType != ActorOperatorToken {
		return fmt.Errorf("a write in one round trip is an operator token's, not a %q's", w.ActorType)
	}
	batch.Queue(tokenLockSQL(w), TokenLockKey(w.CredentialID))
	batch.Queue(`SELECT write_check(count(*) = 1, 'the token is revoked, expired or unknown') FROM operator_tokens
			WHERE id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())`, w.CredentialID)
	if k != nil {
		batch.Queue(`SELECT pg_advisory_xact_lock($1)`, k.lockKey())
		batch.Queue(`SELECT write_check(count(*) = 0, 'a result is stored under the key') FROM idempotency_keys
			WHERE actor_id = $1 AND method = $2 AND route = $3 AND key_hash = $4 AND expires_at > now()`,
			k.ActorID, k.Method, k.Route, k.KeyHash)
	}
	return nil
}

// writeCheckRefused is the SQLSTATE that write_check raises, and nothing else.
const writeCheckRefused = "RW001"

// WriteChecksRefused reports whether err is one of QueueWriteChecks' checks refusing the write.
func WriteChecksRefused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == writeCheckRefused
}

// readWriterCheck says why the write cannot go on: ErrCredentialGone first, then the
// organization's state.
func readWriterCheck(br pgx.BatchResults, w Writer) (time.Time, error) {
	var closed error
	switch w.ActorType {
	case ActorOperatorToken:
		if _, err := br.Exec(); err != nil { // the token's advisory lock
			return time.Time{}, err
		}
		var n int
		var now time.Time
		if err := br.QueryRow().Scan(&n, &now); err != nil {
			return time.Time{}, err
		}
		if n == 0 {
			return time.Time{}, ErrCredentialGone
		}
		return now, nil
	case ActorUser, ActorIntakeKey, ActorInstallation:
		var state string
		var moving bool
		if err := br.QueryRow().Scan(&state, &moving); err != nil {
			return time.Time{}, db.Translate(err)
		}
		closed = OrganizationWritable(state)
		if w.ActorType != ActorUser {
			// An export for a move froze the agents' writes (members' go on).
			closed = agentWritable(state, moving)
		}
		if w.ActorType == ActorInstallation {
			return time.Time{}, closed // an installation's identity cannot be revoked
		}
	default:
		return time.Time{}, nil // the local operator, or an unauthenticated operation: nothing to check
	}
	var n int
	if err := br.QueryRow().Scan(&n); err != nil {
		return time.Time{}, err
	}
	if n == 0 {
		return time.Time{}, ErrCredentialGone
	}
	return time.Time{}, closed
}

// lockKey is the key's advisory lock: a hash of the namespace and the key's hash.
func (k *IdempotencyKey) lockKey() int64 {
	h := sha256.New()
	for _, part := range []string{k.ActorID, k.Method, k.Route} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(k.KeyHash)
	return int64(binary.BigEndian.Uint64(h.Sum(nil)[:8]))
}

// storeResultSQL stores a keyed write's result. An expired record with the same key may still
// be there until the retention job runs.
const storeResultSQL = `INSERT INTO idempotency_keys (actor_id, method, route, key_hash, request_digest, status, headers, body, expires_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			ON CONFLICT (actor_id, method, route, key_hash) DO UPDATE SET request_digest = excluded.request_digest,
			  status = excluded.status, headers = excluded.headers, body = excluded.body,
			  created_at = now(), expires_at = excluded.expires_at`

// storeResultAndAuditSQL is storeResultSQL and auditSQL as one statement (its parameters after
// storeResultSQL's nine): PostgreSQL starts an executor per statement, so a keyed write's end
// sends one statement fewer.
var storeResultAndAuditSQL = "WITH stored AS (" + storeResultSQL + ")\n" + renumberParams(auditSQL, 9)

// renumberParams adds offset to each parameter ($n) of sql, a statement that has no $ other
// than its parameters' (no dollar quoting).
func renumberParams(sql string, offset int) string {
	var b strings.Builder
	for i := 0; i < len(sql); i++ {
		if sql[i] != '$' {
			b.WriteByte(sql[i])
			continue
		}
		j := i + 1
		for j < len(sql) && sql[j] >= '0' && sql[j] <= '9' {
			j++
		}
		n, err := strconv.Atoi(sql[i+1 : j])
		if err != nil {
			panic("renumberParams: a $ that is not a parameter in " + sql)
		}
		b.WriteString("$" + strconv.Itoa(n+offset))
		i = j - 1
	}
	return b.String()
}

// FinishWrite queues, on the batch that ends the write (sent with its COMMIT), the result stored
// under the request's key (when there is one) and the audit event (when there is one): one
// statement when there are both.
func FinishWrite(batch *pgx.Batch, k *IdempotencyKey, result *StoredResult, event *AuditEvent) error {
	var args []any
	if k != nil && result != nil {
		body := result.Body
		if body == nil {
			body = []byte{} // a bodiless response (204) is stored as an empty body, not NULL
		}
		args = []any{k.ActorID, k.Method, k.Route, k.KeyHash, k.Digest, result.Status, headersJSON(result.Headers), body, result.Expires}
	}
	switch {
	case args != nil && event != nil:
		_, audit := AuditStatement(*event)
		batch.Queue(storeResultAndAuditSQL, append(args, audit...)...)
	case args != nil:
		batch.Queue(storeResultSQL, args...)
	case event != nil:
		sql, audit := AuditStatement(*event)
		batch.Queue(sql, audit...)
	}
	return nil
}

// PurgeExpiredIdempotencyKeys deletes expired idempotency records in small batches, so it never
// holds long locks; it returns how many it removed.
func PurgeExpiredIdempotencyKeys(ctx context.Context, q db.DBTX) (int64, error) {
	var total int64
	for {
		tag, err := q.Exec(ctx, `DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM idempotency_keys WHERE expires_at <= now() LIMIT 1000))`)
		if err != nil {
			return total, fmt.Errorf("purge expired idempotency keys: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 1000 {
			return total, nil
		}
	}
}

// headersJSON is a stored result's headers as a JSON object ({} for none).
func headersJSON(h map[string]string) []byte {
	if h == nil {
		h = map[string]string{}
	}
	out, err := json.Marshal(h)
	if err != nil {
		panic(err) // a map of strings always encodes
	}
	return out
}
