package apitest

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// TestIntakeAnswersOverHTTPOnBothPaths: what an agent is answered, for batches of organizations
// in every state, is the same whichever statement stores them: "off" sends each batch alone
// (RENGA_INTAKE_GROUP_COMMIT=off); "group" holds the server's one intake statement
// (RENGA_INTAKE_STATEMENTS=1) with a batch that waits for a lock, sends every request while it
// waits, and lets them go as one group statement (the server's metrics count two statements:
// the held batch's and the group's). Active 202, a duplicate 202 marked duplicate, suspended and
// deleting 403 suspended, moved 410 moved, moving 503 moving with Retry-After, the daily limit
// reached exactly 202, one byte over 429 limit_exceeded; nothing stored for a refusal. Fails when
// a path answers another status or stores a refused batch.
func TestIntakeAnswersOverHTTPOnBothPaths(t *testing.T) {
	t.Parallel()
	for name, path := range map[string]domain.IntakePath{"off": domain.IntakeAlone, "group": domain.IntakeGroupUnderLoad} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			intakeAnswersOverHTTP(t, path)
		})
	}
}

func intakeAnswersOverHTTP(t *testing.T, path domain.IntakePath) {
	env := servertest.Start(t, func(c *server.Config) { c.IntakePath, c.IntakeStatements = path, 1 })
	ctx := context.Background()
	operator := env.Token(t, servertest.AllScopes()...)
	active, suspended, deleting, moved, moving, exact, over, blocker :=
		newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env),
		newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env)
	active.Agent.submit(t, batchBody("dup", 1, 0)).accepted(t)
	// Each limited organization has one batch in today; its limit is that batch and the next
	// exactly, or one byte less.
	pre, next := batchBody("pre", 1, 0), batchBody("next", 1, 0)
	for _, o := range []struct {
		s     agentSetup
		slack int
	}{{exact, 0}, {over, -1}} {
		setPolicy(t, env, operator, o.s.OrgID, map[string]any{"limits": map[string]any{"intake_bytes_per_day": len(pre) + len(next) + o.slack}})
		o.s.Agent.submit(t, pre).accepted(t)
	}
	setOrgState(t, env, suspended.OrgID, "suspended")
	setOrgState(t, env, deleting.OrgID, "deletion_pending")
	setOrgState(t, env, moved.OrgID, "moved")
	if _, r := startMoveExport(t, env, operator, moving.OrgID); r.Status != http.StatusAccepted {
		t.Fatalf("export for a move: %d %s", r.Status, r.Body)
	}

	cases := []struct {
		name   string
		s      agentSetup
		id     string // the batch's ID, in body
		body   []byte
		status int
		code   string // the problem's, or "duplicate" for a 202 of a duplicate
	}{
		{"active", active, "a1", batchBody("a1", 1, 0), http.StatusAccepted, ""},
		{"a duplicate", active, "dup", batchBody("dup", 1, 0), http.StatusAccepted, "duplicate"},
		{"suspended", suspended, "s1", batchBody("s1", 1, 0), http.StatusForbidden, "suspended"},
		{"deleting", deleting, "d1", batchBody("d1", 1, 0), http.StatusForbidden, "suspended"},
		{"moved", moved, "m1", batchBody("m1", 1, 0), http.StatusGone, "moved"},
		{"moving", moving, "f1", batchBody("f1", 1, 0), http.StatusServiceUnavailable, "moving"},
		{"the limit exactly", exact, "next", next, http.StatusAccepted, ""},
		{"a byte over the limit", over, "next", next, http.StatusTooManyRequests, "limit_exceeded"},
	}
	statements, batches := intakeMetric(t, env, "renga_intake_statements_total"), intakeMetric(t, env, "renga_intake_batches_total")
	replies := make([]reply, len(cases))
	if path == domain.IntakeAlone {
		for i, c := range cases {
			replies[i] = c.s.Agent.submit(t, c.body)
		}
		if s, b := intakeMetric(t, env, "renga_intake_statements_total"), intakeMetric(t, env, "renga_intake_batches_total"); s-statements != len(cases) || b-batches != len(cases) {
			t.Errorf("%d statements for %d batches; want one each", s-statements, b-batches)
		}
	} else {
		// The blocker's organization is held: its batch takes the one statement and waits.
		tx := openTx(t, env, `SELECT 1 FROM organizations WHERE id = $1 FOR UPDATE`, blocker.OrgID)
		held := make(chan reply, 1)
		go func() { held <- sendSigned(blocker.Agent, batchBody("blocker", 1, 0)) }()
		waitFor(t, 20*time.Second, "the blocker to hold the statement", func() bool { return lockWaits(t, env, "WITH org AS%") == 1 })
		var wg sync.WaitGroup
		for i, c := range cases {
			wg.Go(func() { replies[i] = sendSigned(c.s.Agent, c.body) })
		}
		waitFor(t, 20*time.Second, "every batch to wait for the statement", func() bool {
			return intakeMetric(t, env, "renga_intake_waiting_batches") == len(cases)
		})
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if r := <-held; r.Status != http.StatusAccepted {
			t.Errorf("the blocker: %d %s", r.Status, r.Body)
		}
		// The blocker alone, then the others in one statement.
		if s, b := intakeMetric(t, env, "renga_intake_statements_total"), intakeMetric(t, env, "renga_intake_batches_total"); s-statements != 2 || b-batches != len(cases)+1 {
			t.Errorf("%d statements for %d batches; want 2 (the blocker, then every other batch together)", s-statements, b-batches)
		}
	}

	for i, c := range cases {
		r := replies[i]
		switch {
		case c.status != http.StatusAccepted:
			if r.Status != c.status {
				t.Errorf("%s: %d %s; want %d %s", c.name, r.Status, r.Body, c.status, c.code)
				continue
			}
			r.expectProblem(t, c.status, c.code)
			if c.code == "moving" {
				expectMoving(t, c.name, r) // and its Retry-After
			}
		case r.Status != http.StatusAccepted:
			t.Errorf("%s: %d %s; want 202", c.name, r.Status, r.Body)
		default:
			if a := r.accepted(t); a.Duplicate != (c.code == "duplicate") {
				t.Errorf("%s: %s; duplicate should be %v", c.name, r.Body, c.code == "duplicate")
			}
		}
		if nb, _ := storedBatch(t, env, c.s.Agent.ID, c.id); (nb == 1) != (c.status == http.StatusAccepted) || nb > 1 {
			t.Errorf("%s: %d batches stored", c.name, nb)
		}
	}
}

// sendSigned sends body as a's batch, signed now; a transport error is a reply of status -1.
func sendSigned(a *specAgent, body []byte) reply {
	r, err := a.doE(http.MethodPost, observationsURL, body)
	if err != nil {
		return reply{Status: -1, Body: []byte(err.Error())}
	}
	return r
}

// intakeMetric reads one of intake's metrics, a whole number, from env's /metrics.
func intakeMetric(t *testing.T, env *servertest.Env, name string) int {
	t.Helper()
	resp, err := http.Get(env.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %q", name, line)
			}
			return n
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}
