package apitest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// holdStatement takes g's one statement with blocked, a batch of an organization that a
// transaction of the test's holds FOR UPDATE: the batch waits for it. commit ends that
// transaction and waits for blocked's answer.
func holdStatement(t *testing.T, env *servertest.Env, g *domain.IntakeGroups, blocked domain.IntakeBatch) (commit func()) {
	t.Helper()
	ctx := context.Background()
	tx := openTx(t, env, `SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE`, blocked.OrganizationID)
	done := make(chan error, 1)
	go func() { _, err := g.Submit(ctx, blocked, 1<<40, 0); done <- err }()
	waitFor(t, 20*time.Second, "the first batch to hold the statement and wait for the lock", func() bool {
		return lockWaits(t, env, "WITH org AS%") == 1
	})
	return func() {
		t.Helper()
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// lockWaits counts the test database's statements that wait for a lock, of those whose text
// is like query.
func lockWaits(t *testing.T, env *servertest.Env, query string) int {
	t.Helper()
	return countRows(t, env, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
		AND query LIKE $1`, query)
}

// plainBatch is a batch of one observation from a's agent, counted as bytes.
func plainBatch(a agentSetup, id string, bytes int64) domain.IntakeBatch {
	return domain.IntakeBatch{OrganizationID: a.OrgID, InstallationID: a.Agent.ID, BatchID: id, Bytes: bytes,
		Body: json.RawMessage(`{"observations": [{"observed_at": "2026-12-01T00:00:00Z", "kind": "k", "data": {}}]}`)}
}

// uncommittedBatchID inserts a's batch ID in a transaction of the test's, left open: a
// statement storing the same ID waits for it.
func uncommittedBatchID(t *testing.T, env *servertest.Env, a agentSetup, id string) pgx.Tx {
	t.Helper()
	return openTx(t, env, `INSERT INTO observation_batches (installation_id, batch_id, organization_id) VALUES ($1, $2, $3)`,
		a.Agent.ID, id, a.OrgID)
}

// openTx begins a transaction of the test's, runs sql in it and leaves it open, holding what
// sql locked until the test commits or rolls it back (rolled back at the test's end).
func openTx(t *testing.T, env *servertest.Env, sql string, args ...any) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
	return tx
}

// intakeGroupRun submits batches through g, one after another, while blocked holds its one
// statement (holdStatement): they all wait, and go as one group when the test commits; then
// during runs, if not nil. limits are the batches' daily limits (nil: far from any). It
// answers each batch's result, in order.
func intakeGroupRun(t *testing.T, env *servertest.Env, g *domain.IntakeGroups, blocked domain.IntakeBatch, batches []domain.IntakeBatch, limits []int64, during func()) ([]bool, []error) {
	t.Helper()
	commit := holdStatement(t, env, g, blocked)
	before := g.Stats()
	fresh, errs := make([]bool, len(batches)), make([]error, len(batches))
	var wg sync.WaitGroup
	for i, b := range batches { // one after another: the queue's order is the slice's
		limit := int64(1 << 40)
		if limits != nil {
			limit = limits[i]
		}
		wg.Go(func() { fresh[i], errs[i] = g.Submit(context.Background(), b, limit, 0) })
		waitFor(t, 20*time.Second, "the batch to wait for the statement", func() bool { return g.Stats().Waiting == before.Waiting+i+1 })
	}
	commit()
	if during != nil {
		during()
	}
	wg.Wait()
	return fresh, errs
}

// TestIntakeGroupAnswersEachBatchAsAlone: batches that wait for intake's statement go together,
// in one statement, and each gets the answer it would get alone: stored once (a duplicate in
// the queue waits for the next group, and is a duplicate), refused for its own reason (unknown
// installation, a key no longer the installation's, a stale policy version, a suspended or
// missing organization), counted exactly against its organization's limit (a group checks each
// batch against the total plus the batches before it; one over goes to the exact check alone),
// and one whose organization another transaction is suspending waits for it, alone, without
// holding up the group, and sees the suspension. Fails when the group answers from the wrong
// row, stores a duplicate twice, undercounts the group's own batches against the limit, or
// waits for a held organization.
func TestIntakeGroupAnswersEachBatchAsAlone(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := context.Background()
	a, b, c, held, blocker := newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env)
	a2 := register(t, env, env, a.Key)
	limited := newAgentSetup(t, env)
	if _, err := env.Pool.Exec(ctx, `UPDATE organizations SET state = 'suspended' WHERE id = $1`, c.OrgID); err != nil {
		t.Fatal(err)
	}
	n := 0
	body := func(tag string) json.RawMessage {
		n++
		tag = fmt.Sprintf("%s-%d", tag, n)
		return json.RawMessage(fmt.Sprintf(`{"observations": [{"observed_at": "2026-12-01T00:00:00Z", "kind": "k", "data": {"tag": %q}},
			{"observed_at": "2026-12-01T00:00:01Z", "kind": "k2", "data": {"n": 1}}]}`, tag))
	}
	batch := func(s agentSetup, agent *specAgent, id string, bytes int64) domain.IntakeBatch {
		return domain.IntakeBatch{OrganizationID: s.OrgID, InstallationID: agent.ID, BatchID: id, Body: body(id), Bytes: bytes,
			PublicKey: agent.Pub, PolicyVersion: 1}
	}
	wrongKey := batch(b, b.Agent, "wrong-key", 100)
	wrongKey.PublicKey = a.Agent.Pub
	stale := batch(b, b.Agent, "stale", 100)
	stale.PolicyVersion = 7
	missing := batch(a, a.Agent, "missing-org", 100)
	missing.OrganizationID = "org_missing"
	const far = 1 << 40
	batches := []domain.IntakeBatch{
		batch(a, a.Agent, "a1", 100),             // 0: stored
		batch(a, a2, "a1", 100),                  // 1: the same batch ID, another installation: stored
		batch(a, a.Agent, "a1", 100),             // 2: a1 again: waits for the next group, a duplicate
		wrongKey,                                 // 3: unknown installation
		stale,                                    // 4: stale policy
		batch(c, c.Agent, "c1", 100),             // 5: suspended
		missing,                                  // 6: no such organization
		batch(limited, limited.Agent, "l1", 400), // 7: within 1000
		batch(limited, limited.Agent, "l2", 700), // 8: 400 + 700 over 1000: refused by the exact check
		batch(limited, limited.Agent, "l3", 500), // 9: over in the group's sum (1600), within exactly (900): stored
		batch(held, held.Agent, "h1", 100),       // 10: its organization being suspended: alone, after the holder, suspended
		batch(b, b.Agent, "b1", 100),             // 11: stored
	}
	limits := []int64{far, far, far, far, far, far, far, 1000, 1000, 1000, far, far}

	// The held organization, being suspended: its batch must not hold up the group; the test
	// commits the holder only once the others are answered and the batch waits alone.
	holder := openTx(t, env, `UPDATE organizations SET state = 'suspended' WHERE id = $1`, held.OrgID)
	// Everything but the held organization's batch is answered while the holder holds it; then
	// the holder commits.
	heldAlone := make(chan bool, 1)
	go func() {
		ok := false
		for range 2000 {
			var stored, waiting int
			_ = env.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM observation_batches WHERE batch_id = 'b1'),
				(SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
					AND query LIKE 'WITH org AS%')`).Scan(&stored, &waiting)
			if ok = stored == 1 && waiting > 0; ok {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		_ = holder.Commit(ctx) // before the answer: the test's cleanup rolls the holder back after it
		heldAlone <- ok
	}()
	g := domain.NewIntakeGroups(env.Pool, 1, 1<<20, domain.IntakeGroupUnderLoad)
	fresh, errs := intakeGroupRun(t, env, g, batch(blocker, blocker.Agent, "blocker", 100), batches, limits, nil)
	if !<-heldAlone {
		t.Error("the group waited for the held organization, or its batch did not wait alone")
	}

	want := []struct {
		fresh bool
		err   error
	}{{true, nil}, {true, nil}, {false, nil}, {false, domain.ErrUnknownInstallation}, {false, &domain.StalePolicyError{}},
		{false, domain.ErrSuspended}, {false, domain.ErrNotFound}, {true, nil}, {false, &domain.DailyLimitError{}}, {true, nil},
		{false, domain.ErrSuspended}, {true, nil}}
	for i, w := range want {
		var ok bool
		var stale *domain.StalePolicyError
		var limited *domain.DailyLimitError
		switch {
		case errors.As(w.err, &stale):
			ok = errors.As(errs[i], &stale) && stale.Version == 1
		case errors.As(w.err, &limited):
			ok = errors.As(errs[i], &limited) && limited.Value == 1000
		default:
			ok = errors.Is(errs[i], w.err)
		}
		if !ok || fresh[i] != w.fresh {
			t.Errorf("batch %d (%s): fresh %v, err %v; want fresh %v, err %v", i, batches[i].BatchID, fresh[i], errs[i], w.fresh, w.err)
		}
		nb, no := storedBatch(t, env, batches[i].InstallationID, batches[i].BatchID)
		if stored := w.err == nil; stored != (nb == 1 && no == 2) || nb > 1 || no > 2 {
			t.Errorf("batch %d (%s): %d batches and %d observations stored", i, batches[i].BatchID, nb, no)
		}
	}
	// Observations in their batch's order, and each with its own data.
	var tags []string
	rows, err := env.Pool.Query(ctx, `SELECT batch_id || ':' || kind || ':' || coalesce(data->>'tag', '') FROM observations
		WHERE organization_id = $1 ORDER BY id`, a.OrgID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		tags = append(tags, s)
	}
	if got := strings.Join(tags, " "); got != "a1:k:a1-4 a1:k2: a1:k:a1-5 a1:k2:" {
		t.Errorf("organization a's observations: %s", got)
	}
	// Usage: exactly the stored batches, each once.
	for _, o := range []struct {
		org             string
		requests, bytes int64
	}{{a.OrgID, 2, 200}, {b.OrgID, 1, 100}, {c.OrgID, 0, 0}, {limited.OrgID, 2, 900}, {held.OrgID, 0, 0}} {
		var requests, bytes int64
		if err := env.Pool.QueryRow(ctx, `SELECT coalesce(sum(intake_requests), 0), coalesce(sum(intake_bytes), 0) FROM usage_counters
			WHERE organization_id = $1`, o.org).Scan(&requests, &bytes); err != nil {
			t.Fatal(err)
		}
		if requests != o.requests || bytes != o.bytes {
			t.Errorf("organization %s: %d requests, %d bytes counted; want %d, %d", o.org, requests, bytes, o.requests, o.bytes)
		}
	}
	if n := countRows(t, env, `SELECT count(*) FROM installations WHERE id = ANY($1) AND last_seen_at IS NULL`,
		[]string{a.Agent.ID, a2.ID, b.Agent.ID, limited.Agent.ID}); n != 0 {
		t.Errorf("%d installations that sent stored batches not seen", n)
	}
	// The blocker alone; the eleven that waited in one statement; the duplicate in the next;
	// the held organization's batch alone. The near-limit checks are transactions of their own.
	if s := g.Stats(); s.Statements != 4 || s.Batches != 13 || s.Waiting != 0 {
		t.Errorf("stats %+v; want 4 statements for 13 batches, none waiting", s)
	}
}

// TestIntakeGroupRefusedByPostgreSQL: a batch PostgreSQL refuses (a number jsonb cannot hold)
// fails its group's statement; each batch then goes alone, so the others are stored and only
// it is refused, also when it is a duplicate (alone, its body is parsed whether stored or not).
// Fails when one batch's error is the group's, or the answer depends on the grouping.
func TestIntakeGroupRefusedByPostgreSQL(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	s, blocker := newAgentSetup(t, env), newAgentSetup(t, env)
	ctx := context.Background()
	body := func(n string) json.RawMessage {
		return json.RawMessage(`{"observations": [{"observed_at": "2026-12-01T00:00:00Z", "kind": "k", "data": {"n": ` + n + `}}]}`)
	}
	batch := func(id, n string) domain.IntakeBatch {
		return domain.IntakeBatch{OrganizationID: s.OrgID, InstallationID: s.Agent.ID, BatchID: id, Body: body(n), Bytes: 100}
	}
	if _, err := domain.SubmitBatch(ctx, env.Pool, batch("old", "0"), 1<<40, 0); err != nil {
		t.Fatal(err)
	}
	g := domain.NewIntakeGroups(env.Pool, 1, 1<<20, domain.IntakeGroupUnderLoad)
	blocked := func(id string) domain.IntakeBatch {
		return domain.IntakeBatch{OrganizationID: blocker.OrgID, InstallationID: blocker.Agent.ID, BatchID: id, Body: body("0"), Bytes: 100}
	}
	// A new batch PostgreSQL refuses, in a group; then a duplicate that it refuses, in a group
	// with no other.
	for round, batches := range [][]domain.IntakeBatch{
		{batch("n0", "1"), batch("n1", "1e200000"), batch("n2", "2"), batch("n3", "3")},
		{batch("n4", "4"), batch("old", "1e200000"), batch("n6", "6")},
	} {
		refusedOne := 1
		// Alone: the answer the group must give.
		var pgErr *pgconn.PgError
		if _, err := domain.SubmitBatch(ctx, env.Pool, batches[refusedOne], 1<<40, 0); !errors.As(err, &pgErr) || pgErr.Code != pgerrcode.NumericValueOutOfRange {
			t.Fatalf("round %d: the batch alone: %v", round, err)
		}
		fresh, errs := intakeGroupRun(t, env, g, blocked(fmt.Sprintf("blocker-%d", round)), batches, nil, nil)
		for i := range batches {
			refused := errors.As(errs[i], &pgErr) && pgErr.Code == pgerrcode.NumericValueOutOfRange
			if (i == refusedOne) != refused || (!refused && (errs[i] != nil || !fresh[i])) {
				t.Errorf("round %d, batch %d: fresh %v, err %v", round, i, fresh[i], errs[i])
			}
			if nb, _ := storedBatch(t, env, s.Agent.ID, batches[i].BatchID); nb != 1 && i != refusedOne || round == 0 && i == refusedOne && nb != 0 {
				t.Errorf("round %d, batch %d: %d stored", round, i, nb)
			}
		}
	}
	// Each round: the blocker; the group, refused; each of its batches alone.
	if st := g.Stats(); st.Statements != 11 || st.Batches != 9 {
		t.Errorf("stats %+v; want 11 statements for 9 batches", st)
	}
}

// TestIntakeGroupCancellation: a request whose context ends while its batch waits is answered
// at once and its batch leaves the queue, never stored; one whose batch is in a running
// statement is answered at once too, and the statement goes on for the others (its batch is
// stored: sent again, a duplicate). Fails when a cancelled request waits for the statement, a
// cancelled batch stays queued, or one request's cancellation stops its group.
func TestIntakeGroupCancellation(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	s, other, blocker := newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env)
	ctx := context.Background()
	g := domain.NewIntakeGroups(env.Pool, 1, 1<<20, domain.IntakeGroupUnderLoad)
	commit := holdStatement(t, env, g, plainBatch(blocker, "blocker", 100))

	// Cancelled while waiting: answered at once, out of the queue.
	queued, cancelQueued := context.WithCancel(ctx)
	queuedErr := make(chan error, 1)
	go func() { _, err := g.Submit(queued, plainBatch(s, "queued", 100), 1<<40, 0); queuedErr <- err }()
	waitFor(t, 20*time.Second, "the batch to wait", func() bool { return g.Stats().Waiting == 1 })
	cancelQueued()
	if err := <-queuedErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled while waiting: %v", err)
	}
	if w := g.Stats().Waiting; w != 0 {
		t.Fatalf("%d batches waiting after the only one was cancelled", w)
	}

	// Cancelled in a running group: the group waits for a transaction that inserted one of its
	// batch IDs, uncommitted.
	key := uncommittedBatchID(t, env, other, "k1")
	inGroup, cancelInGroup := context.WithCancel(ctx)
	inGroupErr := make(chan error, 1)
	var k1Fresh bool
	var wg sync.WaitGroup
	wg.Go(func() {
		var err error
		if k1Fresh, err = g.Submit(ctx, plainBatch(other, "k1", 100), 1<<40, 0); err != nil {
			t.Error(err)
		}
	})
	waitFor(t, 20*time.Second, "k1 to wait", func() bool { return g.Stats().Waiting == 1 })
	go func() { _, err := g.Submit(inGroup, plainBatch(s, "in-group", 100), 1<<40, 0); inGroupErr <- err }()
	waitFor(t, 20*time.Second, "both to wait", func() bool { return g.Stats().Waiting == 2 })
	commit()
	waitFor(t, 20*time.Second, "the group to wait for k1's transaction", func() bool { return lockWaits(t, env, "WITH input AS%") == 1 })
	cancelInGroup()
	select {
	case err := <-inGroupErr:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled in a running group: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a request cancelled in a running group waits for the group")
	}
	if err := key.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !k1Fresh {
		t.Error("k1, stored by the group after the transaction that held its ID rolled back: a duplicate")
	}
	for id, want := range map[string]int{"queued": 0, "in-group": 1, "k1": 1} {
		if n := countRows(t, env, `SELECT count(*) FROM observation_batches WHERE batch_id = $1`, id); n != want {
			t.Errorf("%s: %d stored, want %d", id, n, want)
		}
	}
	if st := g.Stats(); st.Statements != 2 || st.Batches != 4 || st.Waiting != 0 {
		t.Errorf("stats %+v; want 2 statements for 4 batches, none waiting", st)
	}
}

// TestIntakeGroupOfEndedRequestsStops: a group's statement whose requests have all ended is
// cancelled, rather than left to wait (here, for a transaction holding one of its batch IDs)
// until the latest deadline; its statement is free for the next batch at once, and nothing of
// the group is stored. Fails when the statement runs on with no one waiting for it.
func TestIntakeGroupOfEndedRequestsStops(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	s, other, blocker := newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env)
	ctx := context.Background()
	g := domain.NewIntakeGroups(env.Pool, 1, 1<<20, domain.IntakeGroupUnderLoad)
	commit := holdStatement(t, env, g, plainBatch(blocker, "blocker", 100))
	key := uncommittedBatchID(t, env, other, "k1")
	var wg sync.WaitGroup
	var cancels []context.CancelFunc
	for i, b := range []domain.IntakeBatch{plainBatch(other, "k1", 100), plainBatch(s, "s1", 100)} {
		rctx, cancel := context.WithTimeout(ctx, time.Hour)
		cancels = append(cancels, cancel)
		wg.Go(func() {
			if _, err := g.Submit(rctx, b, 1<<40, 0); !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v, want its cancellation", b.BatchID, err)
			}
		})
		waitFor(t, 20*time.Second, "the batch to wait", func() bool { return g.Stats().Waiting == i+1 })
	}
	commit()
	waitFor(t, 20*time.Second, "the group to wait for k1's transaction", func() bool { return lockWaits(t, env, "WITH input AS%") == 1 })
	cancels[0]()
	time.Sleep(200 * time.Millisecond) // one request left: the statement goes on
	if n := lockWaits(t, env, "WITH input AS%"); n != 1 {
		t.Fatalf("the group's statement stopped with one of its requests still waiting (%d lock waits)", n)
	}
	cancels[1]()
	wg.Wait()
	waitFor(t, 20*time.Second, "the group's statement to be cancelled", func() bool { return lockWaits(t, env, "WITH input AS%") == 0 })
	// The statement is free: a batch goes at once, alone, while k1's transaction still holds.
	if fresh, err := g.Submit(ctx, plainBatch(s, "next", 100), 1<<40, 0); err != nil || !fresh {
		t.Fatalf("the next batch: fresh %v, err %v", fresh, err)
	}
	if err := key.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int{"k1": 0, "s1": 0, "next": 1} {
		if n := countRows(t, env, `SELECT count(*) FROM observation_batches WHERE batch_id = $1`, id); n != want {
			t.Errorf("%s: %d stored, want %d", id, n, want)
		}
	}
}

// TestIntakeStatementsAndMetrics: RENGA_INTAKE_STATEMENTS sets how many intake statements run
// at once (2 unless set; a positive integer), and /metrics counts intake's statements and the
// batches they carried (one each here: one agent sends its batches one after another).
func TestIntakeStatementsAndMetrics(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]int{"": 2, "3": 3, "0": 0, "two": 0} {
		cfg, err := server.LoadConfig(func(k string) string {
			if k == "RENGA_INTAKE_STATEMENTS" {
				return v
			}
			return ""
		}, server.ModeRelease)
		if want == 0 {
			if err == nil || !strings.Contains(err.Error(), "RENGA_INTAKE_STATEMENTS") {
				t.Errorf("RENGA_INTAKE_STATEMENTS=%q: err %v, want one naming it", v, err)
			}
		} else if err != nil || cfg.IntakeStatements != want {
			t.Errorf("RENGA_INTAKE_STATEMENTS=%q: %d, err %v; want %d", v, cfg.IntakeStatements, err, want)
		}
	}

	env := servertest.Start(t)
	// At or above the pool's size, the server refuses to start: the API would wait for intake.
	cfg := env.Config
	cfg.IntakeStatements = int(env.Pool.Config().MaxConns)
	if _, err := server.New(cfg, env.Pool, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "RENGA_INTAKE_STATEMENTS") {
		t.Errorf("RENGA_INTAKE_STATEMENTS at the pool's size: %v; want a refusal naming it", err)
	}
	s := newAgentSetup(t, env)
	for i := range 3 {
		b := batchBody(fmt.Sprintf("m%d", i), 1, 100)
		r := send(t, env, req{Method: http.MethodPost, Path: observationsURL, Body: b, Header: s.Agent.sign(http.MethodPost, observationsURL, b, time.Now())})
		if r.Status != http.StatusAccepted {
			t.Fatalf("batch %d: %d %s", i, r.Status, r.Body)
		}
	}
	resp, err := http.Get(env.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{"renga_intake_statements_total 3", "renga_intake_batches_total 3", "renga_intake_waiting_batches 0"} {
		if !strings.Contains(string(body), "\n"+line+"\n") {
			t.Errorf("/metrics has no line %q", line)
		}
	}
}

// TestIntakeGroupCommitSetting: RENGA_INTAKE_GROUP_COMMIT selects intake's path (on unless set,
// off or always; anything else refused, naming it), and the server sends batches by it: off,
// each batch in the statement for one batch, never queued; always, each in the group's
// statement, a group of one when it is alone. Fails when the setting is ignored, or a path
// sends a batch by another's statement.
func TestIntakeGroupCommitSetting(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]domain.IntakePath{"": domain.IntakeGroupUnderLoad, "on": domain.IntakeGroupUnderLoad,
		"off": domain.IntakeAlone, "always": domain.IntakeGroupAlways, "sometimes": -1} {
		cfg, err := server.LoadConfig(func(k string) string {
			if k == "RENGA_INTAKE_GROUP_COMMIT" {
				return v
			}
			return ""
		}, server.ModeRelease)
		if want == -1 {
			if err == nil || !strings.Contains(err.Error(), "RENGA_INTAKE_GROUP_COMMIT") {
				t.Errorf("RENGA_INTAKE_GROUP_COMMIT=%q: err %v, want one naming it", v, err)
			}
		} else if err != nil || cfg.IntakePath != want {
			t.Errorf("RENGA_INTAKE_GROUP_COMMIT=%q: %v, err %v; want %v", v, cfg.IntakePath, err, want)
		}
	}
	for name, want := range map[string]struct {
		path      domain.IntakePath
		statement string // how the statements that store the batches start
	}{"off": {domain.IntakeAlone, "WITH org AS"}, "always": {domain.IntakeGroupAlways, "WITH input AS"}} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			trace := &servertest.RoundTrips{}
			env := servertest.StartTraced(t, trace, func(c *server.Config) { c.IntakePath = want.path })
			s := newAgentSetup(t, env)
			var stored []string
			for i := range 2 {
				b := batchBody(fmt.Sprintf("p%d", i), 1, 100)
				trips := trace.During(func() {
					if r := s.Agent.submit(t, b).accepted(t); r.Duplicate {
						t.Errorf("batch %d: a duplicate", i)
					}
				})
				for _, sql := range servertest.Statements(trips) {
					if strings.Contains(sql, "INSERT INTO observation_batches") {
						stored = append(stored, sql)
					}
				}
			}
			if len(stored) != 2 {
				t.Fatalf("%d statements stored the 2 batches; want 2", len(stored))
			}
			for i, sql := range stored {
				if !strings.HasPrefix(strings.TrimSpace(sql), want.statement) {
					t.Errorf("batch %d stored by %.40q...; want the statement starting %q", i, sql, want.statement)
				}
			}
			resp, err := http.Get(env.URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, line := range []string{"renga_intake_statements_total 2", "renga_intake_batches_total 2", "renga_intake_waiting_batches 0"} {
				if !strings.Contains(string(body), "\n"+line+"\n") {
					t.Errorf("/metrics has no line %q", line)
				}
			}
		})
	}
}

// TestIntakeGroupOutageIsEveryBatchs: a group's statement that the database's outage ends
// (here: its backend terminated, connections refused, while the statement waits) answers that
// error to each of its batches at once, never a client's error (not found, unknown
// installation), and sends none of them again alone. Fails when an outage is taken for one
// batch's fault or for an answer about the batch.
func TestIntakeGroupOutageIsEveryBatchs(t *testing.T) {
	env := servertest.Start(t)
	s, other, blocker := newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env)
	// The group waits for a transaction that inserted one of its batch IDs, uncommitted.
	uncommittedBatchID(t, env, other, "k1")
	g := domain.NewIntakeGroups(env.Pool, 1, 1<<20, domain.IntakeGroupUnderLoad)
	var restore func()
	_, errs := intakeGroupRun(t, env, g, plainBatch(blocker, "blocker", 100), []domain.IntakeBatch{plainBatch(other, "k1", 100), plainBatch(s, "x1", 100)}, nil, func() {
		waitFor(t, 20*time.Second, "the group to wait for k1's transaction", func() bool { return lockWaits(t, env, "WITH input AS%") == 1 })
		restore = cutDatabase(t, env)
	})
	for i, err := range errs {
		var pgErr *pgconn.PgError
		if err == nil || errors.Is(err, domain.ErrNotFound) || errors.Is(err, domain.ErrUnknownInstallation) ||
			errors.As(err, &pgErr) && pgErr.Code[:2] != "57" && pgErr.Code[:2] != "08" && pgErr.Code[:2] != "55" {
			t.Errorf("batch %d during the outage: %v", i, err)
		}
	}
	if st := g.Stats(); st.Statements != 2 || st.Batches != 3 {
		t.Errorf("stats %+v; want 2 statements (the blocker, the group) for 3 batches", st)
	}
	restore()
	env.Pool.Reset() // its connections were terminated; the harness's checks need new ones
}

// TestIntakeGroupCarriesAtMostMaxBytes: a group takes waiting batches while their bytes stay
// within its maximum (what one batch may be, so the margin for what is in flight holds): five
// batches of 500 bytes under a maximum of 1,000 go as groups of 2, 2 and 1. Fails when a group
// passes its maximum or stops short of it.
func TestIntakeGroupCarriesAtMostMaxBytes(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	s, blocker := newAgentSetup(t, env), newAgentSetup(t, env)
	var batches []domain.IntakeBatch
	for i := range 5 {
		batches = append(batches, plainBatch(s, fmt.Sprintf("b%d", i), 500))
	}
	g := domain.NewIntakeGroups(env.Pool, 1, 1000, domain.IntakeGroupUnderLoad)
	fresh, errs := intakeGroupRun(t, env, g, plainBatch(blocker, "blocker", 500), batches, nil, nil)
	for i := range batches {
		if errs[i] != nil || !fresh[i] {
			t.Errorf("batch %d: fresh %v, err %v", i, fresh[i], errs[i])
		}
	}
	if st := g.Stats(); st.Statements != 4 || st.Batches != 6 {
		t.Errorf("stats %+v; want 4 statements (the blocker; groups of 2, 2 and 1) for 6 batches", st)
	}
}
