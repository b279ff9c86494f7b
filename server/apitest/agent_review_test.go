package apitest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/server/servertest"
)

// agentWithKey makes an organization with an owner, an intake key and a registered agent.
func agentWithKey(t *testing.T, env *servertest.Env) (orgID, owner, key string, a *specAgent) {
	t.Helper()
	orgID, owner = agentOwner(t, env)
	key = createIntakeKey(t, env, env, owner, "k").Key
	return orgID, owner, key, register(t, env, env, key)
}

// TestPurgingOrganizationAnswersSuspendedToAgents: while purging, registration and intake get
// 403 suspended (not 401).
func TestPurgingOrganizationAnswersSuspendedToAgents(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	orgID, _, key, a := agentWithKey(t, env)
	if _, err := env.Pool.Exec(context.Background(), `UPDATE organizations SET state = 'purging', purge_after = NULL WHERE id = $1`, orgID); err != nil {
		t.Fatal(err)
	}
	send(t, env, registerReq(key, newSpecAgent(env))).expectProblem(t, http.StatusForbidden, "suspended")
	a.submit(t, batchBody("purging", 1, 0)).expectProblem(t, http.StatusForbidden, "suspended")
}

// TestDuplicateCredentialHeaders: two values of a credential header never authenticate.
func TestDuplicateCredentialHeaders(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, _, key, a := agentWithKey(t, env)
	r := registerReq(key, newSpecAgent(env))
	r.Header = http.Header{"Authorization": {"Bearer " + key, "Bearer " + key}}
	r.Token = ""
	send(t, env, r).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	body := batchBody("dup-headers", 1, 0)
	h := a.sign(http.MethodPost, "/api/v1/agent/observations", body, nowish())
	h.Add("Renga-Timestamp", h.Get("Renga-Timestamp"))
	send(t, env, req{Method: http.MethodPost, Path: "/api/v1/agent/observations", Body: body, Header: h}).
		expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	_, token := scopedToken(t, env, "organizations:read")
	send(t, env, req{Method: http.MethodGet, Path: orgsPath, Header: http.Header{"Authorization": {"Bearer " + token, "Bearer " + token}}}).
		expectProblem(t, http.StatusUnauthorized, "unauthenticated")
}

// TestObservationsAreStoredFaithfully: numbers keep their digits, a lone surrogate is not a
// 500, NUL is a 400, and a year PostgreSQL cannot hold is a 400.
func TestObservationsAreStoredFaithfully(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, owner, _, a := agentWithKey(t, env)
	obs := func(batch, observedAt, data string) []byte {
		return []byte(`{"batch_id":"` + batch + `","observations":[{"observed_at":"` + observedAt + `","kind":"k","data":` + data + `}]}`)
	}
	a.submit(t, obs("precise", "2026-11-30T00:00:00Z", `{"big":123456789012345678901234567890123,"tiny":1e-400,"s":"\ud800x"}`)).accepted(t)
	var list struct {
		Items []struct {
			Data json.RawMessage `json:"data"`
		} `json:"items"`
	}
	send(t, env, req{Method: http.MethodGet, Path: "/api/v1/org/agents/" + a.ID + "/observations", Token: owner}).decode(t, &list)
	if len(list.Items) != 1 {
		t.Fatalf("observations: %+v", list)
	}
	got := string(list.Items[0].Data)
	// jsonb keeps numbers exactly (1e-400 comes back written out in full, not as 0).
	for _, want := range []string{"123456789012345678901234567890123", `"tiny":0.000000000`, `"s":"` + "\ufffd" + `x"`} {
		if !strings.Contains(got, want) {
			t.Errorf("stored data %s lacks %s", got, want)
		}
	}
	if !strings.Contains(got, strings.Repeat("0", 399)+"1") {
		t.Errorf("1e-400 was not kept exactly: %s", got)
	}
	// Without escapes, the observations go to jsonb as sent: the digits stay too.
	a.submit(t, obs("plain", "2026-11-30T00:00:01Z", `{"big":987654321098765432109876543210987,"scale":1.50}`)).accepted(t)
	send(t, env, req{Method: http.MethodGet, Path: "/api/v1/org/agents/" + a.ID + "/observations", Token: owner}).decode(t, &list)
	if len(list.Items) != 2 || !strings.Contains(string(list.Items[0].Data), "987654321098765432109876543210987") ||
		!strings.Contains(string(list.Items[0].Data), "1.50") {
		t.Errorf("plain observation not stored faithfully: %+v", list)
	}
	a.submit(t, obs("nul", "2026-11-30T00:00:00Z", `{"s":"a\u0000b"}`)).expectProblem(t, http.StatusBadRequest, "invalid_request")
	a.submit(t, obs("escaped", "2026-11-30T00:00:00Z", `{"s":"a\\u0000b"}`)).accepted(t) // a backslash, then text
	a.submit(t, obs("year0", "0000-01-01T00:00:00Z", `{}`)).expectProblem(t, http.StatusBadRequest, "invalid_request")
	// JSON numbers have no range, jsonb's have: beyond it is the client's 400, not a 500, refused
	// before any intake statement (in a group, PostgreSQL's refusal would fail the group's);
	// within it (past float64's range too) the number is stored as written.
	statements := metric(t, env, "renga_intake_statements_total")
	a.submit(t, obs("huge", "2026-11-30T00:00:00Z", `{"n":1e131072}`)).expectProblem(t, http.StatusBadRequest, "invalid_request")
	a.submit(t, obs("tiny", "2026-11-30T00:00:00Z", `{"n":1e-20000}`)).expectProblem(t, http.StatusBadRequest, "invalid_request")
	if n := metric(t, env, "renga_intake_statements_total"); n != statements {
		t.Errorf("%v intake statements for two batches refused for their numbers; want none", n-statements)
	}
	a.submit(t, obs("big", "2026-11-30T00:00:02Z", `{"n":1e400}`)).accepted(t)
	send(t, env, req{Method: http.MethodGet, Path: "/api/v1/org/agents/" + a.ID + "/observations", Token: owner}).decode(t, &list)
	if len(list.Items) != 4 || !strings.Contains(string(list.Items[0].Data), "1"+strings.Repeat("0", 400)) {
		t.Errorf("1e400 not stored exactly, or a refused batch stored: %d observations, newest %s", len(list.Items), list.Items[0].Data)
	}
}

// TestObservedAtOffsetsPostgreSQLCannotRead: RFC 3339 allows UTC offsets up to ±23:59,
// PostgreSQL's timestamptz input ±15:59; such an observed_at is stored as the same instant (the
// body says it in UTC), with the rest of the batch as sent, and one whose instant is before year
// 1 in UTC is a 400, never a 500.
func TestObservedAtOffsetsPostgreSQLCannotRead(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, owner, _, a := agentWithKey(t, env)
	body := func(batch string, observedAt ...string) []byte {
		var obs []string
		for _, at := range observedAt {
			obs = append(obs, `{"observed_at":"`+at+`","kind":"k","data":{"n":1.50,"s":"\ud800"}}`)
		}
		return []byte(`{"batch_id":"` + batch + `","observations":[` + strings.Join(obs, ",") + `]}`)
	}
	sent := []string{"2026-11-30T10:00:00+16:00", "2026-11-30T10:00:00.123456-23:59", "2026-11-30T10:00:00+15:59", "2026-11-30T10:00:00Z"}
	if got := a.submit(t, body("far", sent...)).accepted(t); got.Accepted != len(sent) {
		t.Fatalf("accepted %+v", got)
	}
	var list struct {
		Items []struct {
			ObservedAt time.Time       `json:"observed_at"`
			Data       json.RawMessage `json:"data"`
		} `json:"items"`
	}
	send(t, env, req{Method: http.MethodGet, Path: "/api/v1/org/agents/" + a.ID + "/observations", Token: owner}).decode(t, &list)
	if len(list.Items) != len(sent) {
		t.Fatalf("%d observations stored, want %d", len(list.Items), len(sent))
	}
	for i, at := range sent {
		want, err := time.Parse(time.RFC3339Nano, at)
		if err != nil {
			t.Fatal(err)
		}
		got := list.Items[len(sent)-1-i] // newest first
		if !got.ObservedAt.Equal(want) {
			t.Errorf("%s stored as %s", at, got.ObservedAt)
		}
		if d := string(got.Data); !strings.Contains(d, "1.50") || !strings.Contains(d, "\ufffd") {
			t.Errorf("%s: data %s, want the number's digits and the surrogate replaced", at, d)
		}
	}
	// Without escapes too (the body is otherwise stored as sent).
	a.submit(t, []byte(`{"batch_id":"plain","observations":[{"observed_at":"2026-11-30T11:00:00+20:00","kind":"k","data":{"n":2.50}}]}`)).accepted(t)
	send(t, env, req{Method: http.MethodGet, Path: "/api/v1/org/agents/" + a.ID + "/observations", Token: owner}).decode(t, &list)
	if want := time.Date(2026, 11, 29, 15, 0, 0, 0, time.UTC); len(list.Items) != len(sent)+1 || !list.Items[0].ObservedAt.Equal(want) ||
		!strings.Contains(string(list.Items[0].Data), "2.50") {
		t.Errorf("+20:00 without escapes: %d observations, newest %+v", len(list.Items), list.Items[0])
	}
	// Before year 1 in UTC: PostgreSQL cannot read it written in UTC either.
	a.submit(t, body("early", "0001-01-01T05:00:00+20:00")).expectProblem(t, http.StatusBadRequest, "invalid_request")
	a.submit(t, body("early-ok", "0001-01-01T05:00:00+15:00")).accepted(t)
}

func nowish() time.Time { return time.Now() }
