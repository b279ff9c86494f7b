package apitest

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/domain/policyfield"
	"renga.dev/renga/server/servertest"
)

// intakeCase is one batch of TestIntakeGuaranteesOnBothPaths and the answer intake owes it.
type intakeCase struct {
	name  string
	b     domain.IntakeBatch
	limit int64
	fresh bool  // a new batch, stored and counted
	err   error // nil: accepted (fresh, or a duplicate)
}

// TestIntakeGuaranteesOnBothPaths: every guarantee intake's statement keeps, kept by both of its
// statements: the single statement (RENGA_INTAKE_GROUP_COMMIT=off, and any batch alone) and the
// group statement, here one statement carrying batches of seven organizations in different
// states at once. Each path is forced, not left to timing: "single" sends every batch alone
// (domain.IntakeAlone); "group" holds the one statement with a batch waiting for a lock, queues
// every batch behind it, and lets them go as one group (two statements in all: the blocker's
// and the group's). Refused: a suspended organization's batch, a deleting one's (403
// suspended), a moved one's (410 moved), a moving one's (an export for a move froze it: 503
// moving), a batch one byte over the daily limit (429, the exact check), a batch signed with a
// replaced key, a batch naming another organization's installation (unknown installation), a
// batch checked against a policy version no longer current (stale: the current version and
// document). Accepted: an active organization's batches, one reaching the limit exactly, and a
// duplicate (not stored or counted again). Fails when either path stores or counts a refused
// batch, answers the wrong refusal, or stores a duplicate twice: a path blind to the freeze,
// the state, the limit, the key, the installation's organization or the policy version.
func TestIntakeGuaranteesOnBothPaths(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"single", "group"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			intakeGuaranteesOn(t, path)
		})
	}
}

func intakeGuaranteesOn(t *testing.T, path string) {
	env := servertest.Start(t) // no job workers: an export for a move stays pending, its freeze on
	ctx := context.Background()
	operator := env.Token(t, servertest.AllScopes()...)
	active, other, suspended, deleting, moved, moving, limited, replaced, stale, blocker :=
		newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env),
		newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env), newAgentSetup(t, env)
	setOrgState(t, env, suspended.OrgID, "suspended")
	setOrgState(t, env, deleting.OrgID, "deletion_pending")
	setOrgState(t, env, moved.OrgID, "moved")
	if _, r := startMoveExport(t, env, operator, moving.OrgID); r.Status != http.StatusAccepted {
		t.Fatalf("export for a move: %d %s", r.Status, r.Body)
	}
	// The replaced installation's key is no longer the one its batch was verified with.
	if _, err := env.Pool.Exec(ctx, `UPDATE installations SET public_key = $1 WHERE id = $2`, []byte(newSpecAgent(env).Pub), replaced.Agent.ID); err != nil {
		t.Fatal(err)
	}
	// The stale organization's policy moves on from version 1, the batch's.
	setPolicy(t, env, operator, stale.OrgID, map[string]any{"limits": map[string]any{"intake_bytes_per_day": 123456}})
	var staleVersion int64
	if err := env.Pool.QueryRow(ctx, `SELECT version FROM organization_policies WHERE organization_id = $1`, stale.OrgID).Scan(&staleVersion); err != nil || staleVersion < 2 {
		t.Fatalf("the stale organization's policy version: %d, %v", staleVersion, err)
	}
	// Already stored: 600 of the limited organization's 1,000 bytes, and the batch sent again.
	const far, limit = 1 << 40, 1000
	for _, b := range []domain.IntakeBatch{plainBatch(limited, "before", 600), plainBatch(active, "dup", 100)} {
		if fresh, err := domain.SubmitBatch(ctx, env.Pool, b, far, 0); err != nil || !fresh {
			t.Fatalf("batch %s before: fresh %v, err %v", b.BatchID, fresh, err)
		}
	}

	signed := func(s agentSetup, id string) domain.IntakeBatch {
		b := plainBatch(s, id, 100)
		b.PublicKey, b.PolicyVersion = s.Agent.Pub, 1
		return b
	}
	foreign := signed(active, "foreign") // active's organization, other's installation and key
	foreign.InstallationID, foreign.PublicKey = other.Agent.ID, other.Agent.Pub
	exact, over := signed(limited, "exact"), signed(limited, "over")
	exact.Bytes, over.Bytes = 400, 1
	cases := []intakeCase{
		{"active", signed(active, "a1"), far, true, nil},
		{"suspended", signed(suspended, "s1"), far, false, domain.ErrSuspended},
		{"deleting", signed(deleting, "d1"), far, false, domain.ErrSuspended},
		{"moved", signed(moved, "m1"), far, false, domain.ErrMoved},
		{"moving", signed(moving, "f1"), far, false, domain.ErrMoving},
		{"the limit exactly", exact, limit, true, nil},
		{"a byte over the limit", over, limit, false, &domain.DailyLimitError{}},
		{"a duplicate", signed(active, "dup"), far, false, nil},
		{"a replaced key", signed(replaced, "r1"), far, false, domain.ErrUnknownInstallation},
		{"another organization's installation", foreign, far, false, domain.ErrUnknownInstallation},
		{"a stale policy version", signed(stale, "p1"), far, false, &domain.StalePolicyError{}},
		{"another active organization", signed(other, "o1"), far, true, nil},
	}
	batches, limits := make([]domain.IntakeBatch, len(cases)), make([]int64, len(cases))
	for i, c := range cases {
		batches[i], limits[i] = c.b, c.limit
	}

	var fresh []bool
	var errs []error
	switch path {
	case "single":
		g := domain.NewIntakeGroups(env.Pool, 1, 1<<20, domain.IntakeAlone)
		fresh, errs = make([]bool, len(cases)), make([]error, len(cases))
		for i, b := range batches {
			fresh[i], errs[i] = g.Submit(ctx, b, limits[i], 0)
		}
		if s := g.Stats(); s.Statements != int64(len(cases)) || s.Batches != int64(len(cases)) || s.Waiting != 0 {
			t.Errorf("stats %+v; want each of the %d batches in a statement of its own", s, len(cases))
		}
	case "group":
		g := domain.NewIntakeGroups(env.Pool, 1, 1<<20, domain.IntakeGroupUnderLoad)
		fresh, errs = intakeGroupRun(t, env, g, plainBatch(blocker, "blocker", 100), batches, limits, nil)
		if s := g.Stats(); s.Statements != 2 || s.Batches != int64(len(cases))+1 || s.Waiting != 0 {
			t.Errorf("stats %+v; want 2 statements (the blocker, then the %d batches together)", s, len(cases))
		}
	}

	for i, c := range cases {
		if !intakeAnswered(errs[i], c.err, staleVersion) || fresh[i] != c.fresh {
			t.Errorf("%s: fresh %v, err %v; want fresh %v, err %v", c.name, fresh[i], errs[i], c.fresh, c.err)
		}
		nb, no := storedBatch(t, env, c.b.InstallationID, c.b.BatchID)
		if stored := c.fresh || c.name == "a duplicate"; stored != (nb == 1 && no == 1) || nb > 1 || no > 1 {
			t.Errorf("%s: %d batches and %d observations stored", c.name, nb, no)
		}
	}
	// What a stale batch learns: the current policy, to compute its limit from.
	var st *domain.StalePolicyError
	if errors.As(errs[10], &st) {
		if got := domain.Limit(st.Document, nil, policyfield.IntakeBytesPerDay); got != 123456 {
			t.Errorf("the stale batch's policy: intake_bytes_per_day %d, want 123456", got)
		}
	}
	// Usage: each stored batch once, nothing for a refused one.
	for _, o := range []struct {
		name            string
		org             string
		requests, bytes int64
	}{{"active", active.OrgID, 2, 200}, {"other", other.OrgID, 1, 100}, {"limited", limited.OrgID, 2, 1000},
		{"suspended", suspended.OrgID, 0, 0}, {"deleting", deleting.OrgID, 0, 0}, {"moved", moved.OrgID, 0, 0},
		{"moving", moving.OrgID, 0, 0}, {"replaced", replaced.OrgID, 0, 0}, {"stale", stale.OrgID, 0, 0}} {
		var requests, bytes int64
		if err := env.Pool.QueryRow(ctx, `SELECT coalesce(sum(intake_requests), 0), coalesce(sum(intake_bytes), 0) FROM usage_counters
			WHERE organization_id = $1`, o.org).Scan(&requests, &bytes); err != nil {
			t.Fatal(err)
		}
		if requests != o.requests || bytes != o.bytes {
			t.Errorf("organization %s: %d requests, %d bytes counted; want %d, %d", o.name, requests, bytes, o.requests, o.bytes)
		}
	}
	// No observation stored under another organization than its installation's.
	if n := countRows(t, env, `SELECT count(*) FROM observations o JOIN installations i ON i.id = o.installation_id
		WHERE o.organization_id <> i.organization_id`); n != 0 {
		t.Errorf("%d observations stored under another organization than their installation's", n)
	}
}

// intakeAnswered reports whether err is the answer want: the same error, a DailyLimitError of
// the limit, or a StalePolicyError naming version.
func intakeAnswered(err, want error, version int64) bool {
	var stale *domain.StalePolicyError
	var limited *domain.DailyLimitError
	switch {
	case want == nil:
		return err == nil
	case errors.As(want, &stale):
		return errors.As(err, &stale) && stale.Version == version
	case errors.As(want, &limited):
		return errors.As(err, &limited) && limited.Value == 1000
	}
	return errors.Is(err, want)
}
