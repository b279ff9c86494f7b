package apitest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/domain/policyfield"
	"renga.dev/renga/server/servertest"
)

// TestDocumentsWithoutRows: a new organization's policy and settings have no rows until their
// first write; they read as the defaults at version 1 (ETag "1"), and their first write, by 32
// concurrent writers with If-Match "1", stores exactly one document at version 2 (the settings
// writer holds no organization row, unlike the policy's: the version guard of the write itself
// refuses the others), each other writer answered 412 with current_version 2.
func TestDocumentsWithoutRows(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, op := scopedToken(t, env, "organizations:write", "policies:write")

	type document struct {
		name   string
		table  string
		path   string
		create func(orgID string) (token string)
		put    func(token, orgID, ifMatch string, i int) req
		get    func(token, orgID string) req
		winner func(t *testing.T, body reply, i int)
	}
	docs := []document{{
		name: "policy", table: "organization_policies", path: "policy",
		create: func(string) string { return op },
		put: func(token, orgID, ifMatch string, i int) req {
			return putPolicyReq(token, orgID, ifMatch, map[string]any{"limits": map[string]any{"max_agents": i + 1}})
		},
		get: func(token, orgID string) req {
			return req{Method: http.MethodGet, Path: policyPath(orgID), Token: token}
		},
		winner: func(t *testing.T, r reply, i int) {
			var p policyJSON
			r.decode(t, &p)
			if p.Version != 2 || p.Limits["max_agents"] != int64(i+1) {
				t.Errorf("policy %s, want version 2 with writer %d's max_agents", r.Body, i)
			}
		},
	}, {
		name: "settings", table: "organization_settings", path: "settings",
		create: func(orgID string) string {
			return addOwner(t, env, op, orgID, "owner@"+orgID+".example", "Owner").APIKey
		},
		put: func(token, _, ifMatch string, i int) req {
			return settingsReq(token, ifMatch, map[string]any{"session_max_age_hours": i + 1})
		},
		get: func(token, _ string) req { return req{Method: http.MethodGet, Path: settingsPath, Token: token} },
		winner: func(t *testing.T, r reply, i int) {
			var s settingsJSON
			r.decode(t, &s)
			if s.Version != 2 || s.SessionMaxAgeHours != int64(i+1) {
				t.Errorf("settings %s, want version 2 with writer %d's session_max_age_hours", r.Body, i)
			}
		},
	}}
	for _, d := range docs {
		t.Run(d.name, func(t *testing.T) {
			org := createOrg(t, env, op, "rowless-"+d.path, "Rowless")
			token := d.create(org.ID)
			if n := countRows(t, env, `SELECT count(*) FROM `+d.table+` WHERE organization_id = $1`, org.ID); n != 0 {
				t.Fatalf("%d %s rows before the first write, want none", n, d.table)
			}
			read := send(t, env, d.get(token, org.ID))
			if read.Status != http.StatusOK || read.Header.Get("ETag") != `"1"` {
				t.Fatalf("GET before the first write: %d ETag %q %s", read.Status, read.Header.Get("ETag"), read.Body)
			}

			const n = 32
			replies := make([]reply, n)
			errs := make([]error, n)
			parallelDo(n, func(i int) { replies[i], errs[i] = sendE(env, d.put(token, org.ID, `"1"`, i)) })
			winner := -1
			for i, r := range replies {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				switch r.Status {
				case http.StatusOK:
					if winner >= 0 {
						t.Errorf("writers %d and %d both succeeded with If-Match \"1\"", winner, i)
					}
					winner = i
					if r.Header.Get("ETag") != `"2"` {
						t.Errorf("winner's ETag %q, want \"2\"", r.Header.Get("ETag"))
					}
					d.winner(t, r, i)
				case http.StatusPreconditionFailed:
					if p := r.expectProblem(t, http.StatusPreconditionFailed, "version_mismatch"); p.CurrentVersion == nil || *p.CurrentVersion != 2 {
						t.Errorf("writer %d: current_version %v, want 2: %s", i, p.CurrentVersion, r.Body)
					}
				default:
					t.Errorf("writer %d: %d %s", i, r.Status, r.Body)
				}
			}
			if winner < 0 {
				t.Fatal("no writer succeeded")
			}
			final := send(t, env, d.get(token, org.ID))
			if final.Status != http.StatusOK || final.Header.Get("ETag") != `"2"` {
				t.Fatalf("GET after: %d ETag %q", final.Status, final.Header.Get("ETag"))
			}
			d.winner(t, final, winner)
			if n := countRows(t, env, `SELECT count(*) FROM `+d.table+` WHERE organization_id = $1 AND version = 2`, org.ID); n != 1 {
				t.Errorf("%d %s rows at version 2, want 1", n, d.table)
			}
			// The next write goes on from the row.
			if stale := send(t, env, d.put(token, org.ID, `"1"`, n)); stale.Status != http.StatusPreconditionFailed {
				t.Errorf("write with If-Match \"1\" after the first: %d %s", stale.Status, stale.Body)
			}
			if again := send(t, env, d.put(token, org.ID, `"2"`, n)); again.Status != http.StatusOK || again.Header.Get("ETag") != `"3"` {
				t.Errorf("write with If-Match \"2\": %d ETag %q %s", again.Status, again.Header.Get("ETag"), again.Body)
			}
		})
	}
	// An organization that is not there has neither.
	if r := send(t, env, req{Method: http.MethodGet, Path: policyPath(db.NewID("org")), Token: op}); r.Status != http.StatusNotFound {
		t.Errorf("GET policy of no organization: %d %s", r.Status, r.Body)
	}
}

// TestDocumentsFirstWriteRace: many rounds of concurrent first writes straight to the domain
// (no HTTP between them, so that their reads and writes interleave closely): in each round
// exactly one writer with version 1 stores its settings (and its policy), the others get a
// VersionMismatchError with version 2, whichever of them read before or after the winner's commit.
func TestDocumentsFirstWriteRace(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := context.Background()
	const rounds, writers = 100, 8
	for r := range rounds {
		o, err := domain.CreateOrganization(ctx, env.Pool, fmt.Sprintf("first-%d", r), "First")
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range []string{"settings", "policy"} {
			errs := make([]error, writers)
			parallelDo(writers, func(i int) {
				hours := int64(i + 1)
				if doc == "settings" {
					_, _, errs[i] = domain.PutSettings(ctx, env.Pool, o.ID, 1, domain.SettingsWrite{SessionMaxAgeHours: &hours}, nil)
				} else {
					_, _, _, errs[i] = domain.PutPolicy(ctx, env.Pool, o.ID, 1, domain.PolicyDocument{policyfield.MaxAgents: hours}, nil)
				}
			})
			won := 0
			for i, err := range errs {
				var mismatch *domain.VersionMismatchError
				switch {
				case err == nil:
					won++
				case errors.As(err, &mismatch) && mismatch.Current == 2:
				default:
					t.Fatalf("round %d, %s writer %d: %v", r, doc, i, err)
				}
			}
			if won != 1 {
				t.Fatalf("round %d: %d %s writers with version 1 succeeded, want 1", r, won, doc)
			}
		}
	}
}
