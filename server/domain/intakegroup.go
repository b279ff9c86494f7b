package domain

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"renga.dev/renga/server/db"
)

// IntakeGroups is intake's group commit: batches that arrive while an intake statement is
// running wait, and the next statement stores them together, one statement and one commit for
// the group. A second statement (up to the server's intake statements) starts only when the
// waiting batches are more than one group can carry (large batches, an agent catching up), so
// small batches make groups as large as they can. With no statement running, a batch goes
// alone at once, as SubmitBatch sends it, so a quiet server adds no wait (the scheduling:
// db.GroupQueue). IntakePath selects, at construction, this path, SubmitBatch's alone, or the
// group's statement for every batch.
//
// A group keeps what one batch's statement guarantees, for each of its batches:
//   - the same checks, from one snapshot: the organization held FOR SHARE (rows locked in ID
//     order), its state and a move's freeze, the installation and its key, the policy version
//     the limit came from;
//   - today's total: each batch is checked against the total plus every batch of its
//     organization before it in the group (accepted or not: never less than what is stored);
//   - one group carries at most maxBytes, what one batch may be (pipeline.MaxBodyBytes), so what
//     a server's statements have in flight is still at most one batch's worth per connection:
//     SubmitBatch's margin holds as it is;
//   - a batch ID once: a group never carries two batches with the same (installation, batch
//     ID); the second waits for the next group, where it is a duplicate. (Two groups running at
//     once may each carry it, a client's retry: the second waits for the first's commit, a
//     statement's time, and finds it a duplicate. Keys are inserted in key order, so two
//     groups cannot wait for each other.)
//   - every body parsed as jsonb, stored or not, so a body PostgreSQL cannot hold fails the
//     group as it fails alone.
//
// No intake statement waits for an installation's row (last_seen_at is written SKIP LOCKED:
// one being written is being seen). An organization whose row another transaction holds (a
// suspension, a move's freeze) is skipped (SKIP LOCKED): its batches go alone, outside the
// statements' count, and wait for it as a batch alone does, so no organization's lock holds up
// another's batches. A group whose statement PostgreSQL refuses for what a batch holds (a
// number jsonb cannot hold, which the server's handler refuses before, by NumbersFitNumeric;
// a constraint; oneBatchsFault) stores nothing; its batches go back first in the
// queue, each to go alone, so one batch's error is its own and costs a statement per batch of
// its group, within the statements' count. Any other error (connection lost, the database
// refusing connections, a timeout) is every batch's: alone, each would meet it too. A group's
// statement is no one request's: a request whose context ends gets its error at once, and the
// statement goes on for the others, until the latest of its batches' deadlines, or until every
// request of the group has ended (then it is cancelled: no one waits for it).
type IntakeGroups struct {
	pool     Pool
	path     IntakePath
	maxBytes int64                       // a group's bytes, at most (a group has at least one batch)
	q        *db.GroupQueue[*intakeCall] // its slots are the statements running at once
}

// IntakeStats counts intake's statements and the batches sent to them (each once) since the
// server started (Batches/Statements is the mean group), and the batches waiting now.
type IntakeStats struct {
	Statements, Batches int64
	Waiting             int
}

// Stats is a snapshot of the counts.
func (g *IntakeGroups) Stats() IntakeStats {
	statements, batches, waiting := g.q.Counts()
	return IntakeStats{Statements: statements, Batches: batches, Waiting: waiting}
}

// maxGroupBatches bounds a group's batches (and its statement's arrays). At most 64: an
// observation's ID holds its batch's place among its organization's in the group in 6 bits
// (observation_id, migration 00020).
const maxGroupBatches = 64

// IntakePath is how IntakeGroups sends batches: the server's setting RENGA_INTAKE_GROUP_COMMIT
// (ParseIntakePath), and what a test selects to run intake through one path whatever the load.
type IntakePath int

const (
	// IntakeGroupUnderLoad ("on", the default): a batch that finds no intake statement running
	// goes alone, at once; batches that arrive while one runs go together in the next.
	IntakeGroupUnderLoad IntakePath = iota
	// IntakeAlone ("off"): every batch is its own statement, as SubmitBatch sends it; no batch
	// waits for another's.
	IntakeAlone
	// IntakeGroupAlways ("always"): every batch waits in the queue and goes in a group's
	// statement, a group of one included (a batch sent again alone, after its group failed,
	// excepted).
	IntakeGroupAlways
)

// ParseIntakePath reads RENGA_INTAKE_GROUP_COMMIT's value: "on" (or empty), "off" or "always".
func ParseIntakePath(s string) (IntakePath, error) {
	switch s {
	case "", "on":
		return IntakeGroupUnderLoad, nil
	case "off":
		return IntakeAlone, nil
	case "always":
		return IntakeGroupAlways, nil
	}
	return 0, fmt.Errorf("must be on, off or always, got %q", s)
}

// NewIntakeGroups sends batches through pool by path, with at most statements intake statements
// running at once, each carrying at most maxBytes (what one batch may be).
func NewIntakeGroups(pool Pool, statements int, maxBytes int64, path IntakePath) *IntakeGroups {
	g := &IntakeGroups{pool: pool, path: path, maxBytes: maxBytes}
	g.q = db.NewGroupQueue(statements, g.pick, g.send)
	return g
}

// Submit is SubmitBatch through the group commit.
func (g *IntakeGroups) Submit(ctx context.Context, b IntakeBatch, limit, margin int64) (bool, error) {
	r, err := g.accept(ctx, b, limit-margin)
	return finishBatch(ctx, g.pool, b, limit, r, err)
}

type intakeCall struct {
	db.Waiter
	b         IntakeBatch
	threshold int64
	r         accepted
	err       error
}

// errAlone: a group's statement skipped the batch's organization (held by another
// transaction); the batch goes alone, and waits for it.
var errAlone = errors.New("intake: send the batch alone")

func (g *IntakeGroups) accept(ctx context.Context, b IntakeBatch, threshold int64) (accepted, error) {
	if g.path == IntakeAlone {
		g.q.CountAlone()
		return acceptBatch(ctx, g.pool, b, threshold)
	}
	if g.path == IntakeGroupUnderLoad && g.q.Enter() {
		// A statement is free: this batch goes now, alone, on the request's own context.
		defer g.q.Release()
		return acceptBatch(ctx, g.pool, b, threshold)
	}
	c := &intakeCall{Waiter: db.Waiter{Ctx: ctx}, b: b, threshold: threshold}
	if err := g.q.Wait(c); err != nil {
		// If in a statement already, which goes on for the others: the batch may be stored or
		// not, as when a request's own statement is cancelled (sent again, it is a duplicate
		// or new).
		return accepted{}, err
	}
	if errors.Is(c.err, errAlone) {
		// Waiting for a lock, not working: outside the statements' count, as a batch alone
		// waited before groups (and a group waits for no organization).
		g.q.CountSend()
		return acceptBatch(ctx, g.pool, b, threshold)
	}
	return c.r, c.err
}

// pick takes the next group from the queue, in arrival order: within maxBytes and
// maxGroupBatches, one batch per (installation, batch ID); a batch to go alone is a group of its
// own.
func (g *IntakeGroups) pick(queue []*intakeCall) (group, rest []*intakeCall) {
	var (
		bytes int64
		keys  map[[2]string]bool
	)
	rest = queue[:0]
	for _, c := range queue {
		key := [2]string{c.b.InstallationID, c.b.BatchID}
		if len(group) > 0 && (group[0].Alone() || c.Alone() || len(group) == maxGroupBatches || bytes+c.b.Bytes > g.maxBytes || keys[key]) {
			rest = append(rest, c)
			continue
		}
		if keys == nil {
			keys = map[[2]string]bool{}
		}
		keys[key] = true
		bytes += c.b.Bytes
		group = append(group, c)
	}
	return group, rest
}

// send runs one group's statement and answers each of its batches.
func (g *IntakeGroups) send(group []*intakeCall) {
	ctx, cancel := db.GroupContextOf(group)
	defer cancel()
	if len(group) == 1 && (g.path != IntakeGroupAlways || group[0].Alone()) {
		c := group[0]
		c.r, c.err = acceptBatch(ctx, g.pool, c.b, c.threshold)
		c.Answer()
		return
	}
	answers, err := acceptBatches(ctx, g.pool, group)
	if oneBatchsFault(err) {
		// PostgreSQL refused the group: each of its batches goes again, alone, first in the
		// queue (and within the statements' count: a batch that fails every group it is in
		// costs the others one statement each, not a burst).
		g.q.Requeue(group)
		return
	}
	for i, c := range group {
		switch {
		case err != nil:
			c.err = err
		case answers[i].busy:
			c.err = errAlone
		default:
			c.r, c.err = answers[i].outcome()
		}
		c.Answer()
	}
}

// oneBatchsFault reports whether a group's statement failed for what one of its batches holds
// or meets: a value PostgreSQL cannot take (class 22), a constraint (23: an installation
// deleted meanwhile), a deadlock or serialization failure (40), a limit of PostgreSQL's (54).
// Anything else (the connection, the server's resources or state, 08, 53, 55, 57, ...) would be
// every batch's alone too.
func oneBatchsFault(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", "23", "40", "54":
		return true
	}
	return false
}

// acceptBatches is acceptBatch for a group, in one statement: one answer per batch, in order.
func acceptBatches(ctx context.Context, q Pool, group []*intakeCall) ([]intakeAnswer, error) {
	n := len(group)
	var (
		orgs, installations, batchIDs, bodies = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		sizes, thresholds, versions           = make([]int64, n), make([]int64, n), make([]int64, n)
		keys                                  = make([][]byte, n)
	)
	for i, c := range group {
		orgs[i], installations[i], batchIDs[i], bodies[i] = c.b.OrganizationID, c.b.InstallationID, c.b.BatchID, string(c.b.Body)
		sizes[i], thresholds[i], versions[i], keys[i] = c.b.Bytes, c.threshold, c.b.PolicyVersion, c.b.PublicKey
	}
	rows, err := q.Query(ctx, `WITH input AS (
			SELECT org, inst, batch_id, body::jsonb AS body, bytes, threshold, public_key, policy_version, n
			FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bytea[], $8::bigint[])
				WITH ORDINALITY AS i(org, inst, batch_id, body, bytes, threshold, public_key, policy_version, n)),
		org AS (
			SELECT id, state, moving_transfer_id IS NOT NULL AS moving FROM organizations
			WHERE id IN (SELECT org FROM input) ORDER BY id FOR SHARE SKIP LOCKED),
		pol AS (
			SELECT organization_id, version, document FROM organization_policies WHERE organization_id IN (SELECT org FROM input)),
		today AS (
			SELECT organization_id, sum(intake_bytes)::bigint AS total FROM usage_counters
			WHERE organization_id IN (SELECT org FROM input) AND day = (now() AT TIME ZONE 'UTC')::date GROUP BY organization_id),
		checked AS (
			SELECT i.n, i.org, i.inst, i.batch_id, i.body, i.bytes, o.state, coalesce(o.moving, false) AS moving, coalesce(p.version, 1) AS version,
				o.id IS NULL AND EXISTS (SELECT 1 FROM organizations x WHERE x.id = i.org) AS busy,
				i.policy_version = 0 OR coalesce(p.version, 1) = i.policy_version AS current, coalesce(p.document, '{}') AS document,
				EXISTS (SELECT 1 FROM installations s WHERE s.id = i.inst AND s.organization_id = i.org
					AND (i.public_key IS NULL OR s.public_key = i.public_key)) AS installed,
				coalesce(t.total, 0) + sum(i.bytes) OVER (PARTITION BY i.org ORDER BY i.n) <= i.threshold AS under
			FROM input i LEFT JOIN org o ON o.id = i.org LEFT JOIN pol p ON p.organization_id = i.org
				LEFT JOIN today t ON t.organization_id = i.org),
		within AS (
			SELECT * FROM checked WHERE state = 'active' AND NOT moving AND current AND installed AND under),
		batch AS (
			INSERT INTO observation_batches (installation_id, batch_id, organization_id)
			SELECT inst, batch_id, org FROM within ORDER BY inst, batch_id
			ON CONFLICT DO NOTHING RETURNING installation_id, batch_id),
		fresh AS (
			SELECT w.n, w.org, w.inst, w.batch_id, w.body, w.bytes, `+observationRandom+` AS r,
				(row_number() OVER (PARTITION BY w.org ORDER BY w.n) - 1)::integer AS seq FROM within w
			JOIN batch b ON b.installation_id = w.inst AND b.batch_id = w.batch_id),
		stored AS (
			INSERT INTO observations (id, organization_id, installation_id, batch_id, observed_at, kind, data)
			SELECT observation_id(now(), f.seq, f.r, e.k), f.org, f.inst, f.batch_id, (o->>'observed_at')::timestamptz, o->>'kind', o->'data'
			FROM fresh f, jsonb_array_elements(f.body -> 'observations') WITH ORDINALITY AS e(o, k) ORDER BY f.n, e.k),
		counted AS (
			INSERT INTO usage_counters AS c (organization_id, day, shard, intake_requests, intake_bytes)
			SELECT org, (now() AT TIME ZONE 'UTC')::date, `+intakeShard+`, count(*), sum(bytes) FROM fresh GROUP BY org
			ON CONFLICT (organization_id, day, shard) DO UPDATE SET
				intake_requests = c.intake_requests + excluded.intake_requests, intake_bytes = c.intake_bytes + excluded.intake_bytes),
		touched AS (
			SELECT id FROM installations
			WHERE id IN (SELECT inst FROM within) AND (last_seen_at IS NULL OR last_seen_at < now() - interval '1 minute')
			ORDER BY id FOR NO KEY UPDATE SKIP LOCKED),
		seen AS (
			UPDATE installations SET last_seen_at = now() WHERE id IN (SELECT id FROM touched))
		SELECT c.busy, c.state, c.moving, c.n IN (SELECT n FROM within), c.n IN (SELECT n FROM fresh), c.installed, c.version,
			CASE WHEN NOT c.current THEN c.document END
		FROM checked c ORDER BY c.n`,
		orgs, installations, batchIDs, bodies, sizes, thresholds, keys, versions)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	answers := make([]intakeAnswer, 0, n)
	for rows.Next() {
		var r intakeAnswer
		if err := rows.Scan(&r.busy, &r.state, &r.moving, &r.ok, &r.fresh, &r.installed, &r.version, &r.policy); err != nil {
			return nil, err
		}
		answers = append(answers, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(answers) != n {
		return nil, errors.New("intake: a group's statement answered for fewer batches than it carried")
	}
	return answers, nil
}
