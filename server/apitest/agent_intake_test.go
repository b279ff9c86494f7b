package apitest

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// Agent acceptance (issue 5, RFD 23): installations, intake, inventory and retention.

// batchBody is an observation batch of n observations whose data is padded with pad bytes each.
func batchBody(batchID string, n, pad int) []byte {
	obs := make([]map[string]any, n)
	for i := range obs {
		obs[i] = map[string]any{"observed_at": time.Now().UTC().Add(-time.Duration(n-i) * time.Second).Format(time.RFC3339),
			"kind": "host.facts", "data": map[string]any{"seq": i, "hostname": "web-1", "pad": strings.Repeat("x", pad)}}
	}
	return jsonBody(map[string]any{"batch_id": batchID, "observations": obs})
}

// batchAccepted is submitObservations' 202 body.
type batchAccepted struct {
	Accepted  int  `json:"accepted"`
	Duplicate bool `json:"duplicate"`
}

// submit sends a batch signed by a and returns the reply.
func (a *specAgent) submit(t testing.TB, body []byte) reply {
	t.Helper()
	return a.do(t, http.MethodPost, observationsURL, body)
}

// accepted decodes a 202 and fails the test on anything else.
func (r reply) accepted(t testing.TB) batchAccepted {
	t.Helper()
	if r.Status != http.StatusAccepted {
		t.Fatalf("batch: %d %s", r.Status, r.Body)
	}
	var b batchAccepted
	r.decode(t, &b)
	return b
}

// storedBatch counts a batch's rows in the deduplication log and its stored observations.
func storedBatch(t testing.TB, env *servertest.Env, installationID, batchID string) (batches, observations int) {
	t.Helper()
	return countRows(t, env, `SELECT count(*) FROM observation_batches WHERE installation_id = $1 AND batch_id = $2`, installationID, batchID),
		countRows(t, env, `SELECT count(*) FROM observations WHERE installation_id = $1 AND batch_id = $2`, installationID, batchID)
}

// usageToday reads the organization's usage for today (UTC) through the operator API.
func usageToday(t testing.TB, env *servertest.Env, token, orgID string) usageDayJSON {
	t.Helper()
	today := day(time.Now())
	var sum usageDayJSON
	for _, d := range orgUsage(t, env, token, orgID, today, today) {
		sum.IntakeRequests += d.IntakeRequests
		sum.IntakeBytes += d.IntakeBytes
		sum.JobsCreated += d.JobsCreated
	}
	return sum
}

// setPolicy replaces an organization's policy through the operator API.
func setPolicy(t testing.TB, env *servertest.Env, token, orgID string, doc any) {
	t.Helper()
	_, etag := getPolicy(t, env, token, orgID)
	putPolicy(t, env, token, orgID, etag, doc)
}

// agentSetup is an organization with an owner, an intake key and one registered agent.
type agentSetup struct {
	OrgID string
	Owner string
	Key   string
	Agent *specAgent
}

func newAgentSetup(t testing.TB, env *servertest.Env) agentSetup {
	t.Helper()
	orgID, owner := agentOwner(t, env)
	k := createIntakeKey(t, env, env, owner, "k")
	return agentSetup{OrgID: orgID, Owner: owner, Key: k.Key, Agent: register(t, env, env, k.Key)}
}

// installationJSON is an installation as the API shows it.
type installationJSON struct {
	InstallationID string  `json:"installation_id"`
	OrganizationID string  `json:"organization_id"`
	PublicKey      string  `json:"public_key"`
	Hostname       string  `json:"hostname"`
	OS             string  `json:"os"`
	RegisteredAt   string  `json:"registered_at"`
	LastSeenAt     *string `json:"last_seen_at"`
}

// TestInstallationRegistration: registration is idempotent on installation_id; another public
// key for a known installation is a conflict and changes nothing.
func TestInstallationRegistration(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	orgID, owner := agentOwner(t, env)
	key := createIntakeKey(t, env, env, owner, "k").Key
	a := newSpecAgent(env)

	first := send(t, env, registerReq(key, a))
	if first.Status != http.StatusCreated {
		t.Fatalf("register: %d %s", first.Status, first.Body)
	}
	var inst installationJSON
	first.decode(t, &inst)
	if inst.InstallationID != a.ID || inst.OrganizationID != orgID || inst.PublicKey != a.publicKeyB64() ||
		inst.OS != "linux" || inst.Hostname == "" || inst.RegisteredAt == "" {
		t.Errorf("registered installation = %+v", inst)
	}
	again := send(t, env, registerReq(key, a))
	if again.Status != http.StatusOK || !bytes.Equal(again.Body, first.Body) {
		t.Errorf("registering again: %d %s, want 200 with the same body %s", again.Status, again.Body, first.Body)
	}

	// Another public key for the same installation ID: 409, and the stored key is unchanged.
	impostor := newSpecAgent(env)
	impostor.ID = a.ID
	send(t, env, registerReq(key, impostor)).expectProblem(t, http.StatusConflict, "installation_conflict")
	var stored []byte
	if err := env.Pool.QueryRow(context.Background(), `SELECT public_key FROM installations WHERE id = $1`, a.ID).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(stored, a.Pub) {
		t.Error("a conflicting registration replaced the installation's public key")
	}
	// The same installation ID and key through another organization's intake key: a conflict too.
	_, otherOwner := agentOwner(t, env)
	otherKey := createIntakeKey(t, env, env, otherOwner, "other").Key
	send(t, env, registerReq(otherKey, a)).expectProblem(t, http.StatusConflict, "installation_conflict")
	if n := countRows(t, env, `SELECT count(*) FROM installations WHERE id = $1 AND organization_id = $2`, a.ID, orgID); n != 1 {
		t.Errorf("installation rows in its organization = %d", n)
	}
	// The old key still signs for it; the impostor's does not.
	a.submit(t, batchBody("after-conflict", 1, 0)).accepted(t)
	impostor.submit(t, batchBody("impostor", 1, 0)).expectProblem(t, http.StatusUnauthorized, "unauthenticated")

	// A public key that is not 32 bytes of standard base64 is a 400.
	bad := newSpecAgent(env)
	r := registerReq(key, bad)
	r.Body = jsonBody(map[string]string{"installation_id": bad.ID, "public_key": strings.Repeat("A", 42) + "==", "hostname": "h", "os": "linux"})
	send(t, env, r).expectProblem(t, http.StatusBadRequest, "invalid_request")
	if n := countRows(t, env, `SELECT count(*) FROM installations WHERE id = $1`, bad.ID); n != 0 {
		t.Error("an invalid registration was stored")
	}
}

// TestIntakeDeduplicatedAndCountedOnce: the same batch sent ten times at once and ten times in a
// row is stored once and counted once in usage (requests and bytes), through each of intake's
// paths (RENGA_INTAKE_GROUP_COMMIT).
func TestIntakeDeduplicatedAndCountedOnce(t *testing.T) {
	t.Parallel()
	for name, path := range intakePaths {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			intakeDeduplicatedAndCountedOnce(t, path)
		})
	}
}

// intakePaths are intake's paths by RENGA_INTAKE_GROUP_COMMIT's value.
var intakePaths = map[string]domain.IntakePath{"on": domain.IntakeGroupUnderLoad, "off": domain.IntakeAlone, "always": domain.IntakeGroupAlways}

func intakeDeduplicatedAndCountedOnce(t *testing.T, path domain.IntakePath) {
	env := servertest.Start(t, func(c *server.Config) { c.IntakePath = path })
	s := newAgentSetup(t, env)
	_, usageToken := scopedToken(t, env, "usage:read")

	check := func(name string, replies []reply, batchID string, wantRequests, wantBytes int64) {
		t.Helper()
		fresh := 0
		for _, r := range replies {
			b := r.accepted(t)
			if b.Accepted != 3 {
				t.Errorf("%s: accepted = %d, want 3", name, b.Accepted)
			}
			if !b.Duplicate {
				fresh++
			}
		}
		if fresh != 1 {
			t.Errorf("%s: %d of %d replies say duplicate false, want exactly 1", name, fresh, len(replies))
		}
		if batches, obs := storedBatch(t, env, s.Agent.ID, batchID); batches != 1 || obs != 3 {
			t.Errorf("%s: stored %d batch rows and %d observations, want 1 and 3", name, batches, obs)
		}
		u := usageToday(t, env, usageToken, s.OrgID)
		if u.IntakeRequests != wantRequests || u.IntakeBytes != wantBytes {
			t.Errorf("%s: usage intake_requests %d, intake_bytes %d; want %d, %d", name, u.IntakeRequests, u.IntakeBytes, wantRequests, wantBytes)
		}
		if req, by, _, _ := storedUsage(t, env, s.OrgID, day(time.Now())); req != wantRequests || by != wantBytes {
			t.Errorf("%s: usage_counters intake_requests %d, intake_bytes %d; want %d, %d", name, req, by, wantRequests, wantBytes)
		}
	}

	// Batch A: ten at once, then ten in a row.
	a := batchBody("batch-a", 3, 100)
	replies := make([]reply, 10)
	errs := make([]error, 10)
	parallelDo(10, func(i int) { replies[i], errs[i] = s.Agent.doE(http.MethodPost, observationsURL, a) })
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ {
		replies = append(replies, s.Agent.submit(t, a))
	}
	check("batch-a concurrent then sequential", replies, "batch-a", 1, int64(len(a)))

	// Batch B: ten in a row, then ten at once.
	b := batchBody("batch-b", 3, 200)
	replies = nil
	for i := 0; i < 10; i++ {
		replies = append(replies, s.Agent.submit(t, b))
	}
	more := make([]reply, 10)
	parallelDo(10, func(i int) { more[i], errs[i] = s.Agent.doE(http.MethodPost, observationsURL, b) })
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	check("batch-b sequential then concurrent", append(replies, more...), "batch-b", 2, int64(len(a)+len(b)))

	// The same batch ID from another installation is another batch.
	other := register(t, env, env, s.Key)
	if r := other.submit(t, a).accepted(t); r.Duplicate {
		t.Error("another installation's batch with the same ID was taken for a duplicate")
	}
	if n := countRows(t, env, `SELECT count(*) FROM observations WHERE organization_id = $1`, s.OrgID); n != 9 {
		t.Errorf("observations stored = %d, want 9", n)
	}
}

// parallelDo runs f(0..n-1) at once and waits for all.
func parallelDo(n int, f func(i int)) {
	done := make(chan struct{})
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			<-start
			f(i)
		}()
	}
	close(start)
	for i := 0; i < n; i++ {
		<-done
	}
}

// observationJSON is an observation as owners read it.
type observationJSON struct {
	ID             string         `json:"id"`
	InstallationID string         `json:"installation_id"`
	BatchID        string         `json:"batch_id"`
	ObservedAt     string         `json:"observed_at"`
	ReceivedAt     string         `json:"received_at"`
	Kind           string         `json:"kind"`
	Data           map[string]any `json:"data"`
}

// listAllObservations pages through an installation's observations with page_size size.
func listAllObservations(t testing.TB, env *servertest.Env, owner, installationID string, size int) ([]observationJSON, int) {
	t.Helper()
	var all []observationJSON
	pages := 0
	token := ""
	for {
		path := agentsPath + "/" + installationID + "/observations?page_size=" + itoa(size)
		if token != "" {
			path += "&page_token=" + token
		}
		rep := send(t, env, req{Method: http.MethodGet, Path: path, Token: owner})
		if rep.Status != http.StatusOK {
			t.Fatalf("list observations: %d %s", rep.Status, rep.Body)
		}
		var page struct {
			Items         []observationJSON `json:"items"`
			NextPageToken *string           `json:"next_page_token"`
		}
		rep.decode(t, &page)
		pages++
		if len(page.Items) > size {
			t.Errorf("page of %d items with page_size %d", len(page.Items), size)
		}
		all = append(all, page.Items...)
		if page.NextPageToken == nil || pages > 50 {
			return all, pages
		}
		token = *page.NextPageToken
	}
}

func itoa(n int) string { return string(jsonBody(n)) }

// TestOwnersReadInventory: owners list their agents and page through an agent's observations,
// newest first; another organization's owner sees neither.
func TestOwnersReadInventory(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	s := newAgentSetup(t, env)
	second := register(t, env, env, s.Key)
	s.Agent.submit(t, batchBody("inv-1", 3, 0)).accepted(t)
	s.Agent.submit(t, batchBody("inv-2", 2, 0)).accepted(t)
	second.submit(t, batchBody("inv-1", 1, 0)).accepted(t)

	// Agents, one per page.
	seen := map[string]installationJSON{}
	token := ""
	for pages := 0; pages < 5; pages++ {
		path := agentsPath + "?page_size=1"
		if token != "" {
			path += "&page_token=" + token
		}
		rep := send(t, env, req{Method: http.MethodGet, Path: path, Token: s.Owner})
		if rep.Status != http.StatusOK {
			t.Fatalf("list agents: %d %s", rep.Status, rep.Body)
		}
		var page struct {
			Items         []installationJSON `json:"items"`
			NextPageToken *string            `json:"next_page_token"`
		}
		rep.decode(t, &page)
		for _, i := range page.Items {
			if _, dup := seen[i.InstallationID]; dup {
				t.Errorf("agent %s listed twice", i.InstallationID)
			}
			seen[i.InstallationID] = i
		}
		if page.NextPageToken == nil {
			break
		}
		token = *page.NextPageToken
	}
	if len(seen) != 2 {
		t.Fatalf("agents listed: %d, want 2", len(seen))
	}
	if i := seen[s.Agent.ID]; i.PublicKey != s.Agent.publicKeyB64() || i.OrganizationID != s.OrgID || i.LastSeenAt == nil {
		t.Errorf("agent listed as %+v (last_seen_at should be set by its intake)", i)
	}

	obs, pages := listAllObservations(t, env, s.Owner, s.Agent.ID, 2)
	if len(obs) != 5 || pages != 3 {
		t.Fatalf("observations: %d in %d pages, want 5 in 3", len(obs), pages)
	}
	ids := map[string]bool{}
	for i, o := range obs {
		if ids[o.ID] {
			t.Errorf("observation %s listed twice", o.ID)
		}
		ids[o.ID] = true
		if o.InstallationID != s.Agent.ID || o.Kind != "host.facts" || o.Data["hostname"] != "web-1" {
			t.Errorf("observation = %+v", o)
		}
		if i == 0 && o.BatchID != "inv-2" {
			t.Errorf("newest observation is from %s, want inv-2", o.BatchID)
		}
		if i == len(obs)-1 && o.BatchID != "inv-1" {
			t.Errorf("oldest observation is from %s, want inv-1", o.BatchID)
		}
	}
	if got, _ := listAllObservations(t, env, s.Owner, second.ID, 100); len(got) != 1 {
		t.Errorf("second agent's observations = %d, want 1", len(got))
	}
	send(t, env, req{Method: http.MethodGet, Path: agentsPath + "/" + s.Agent.ID + "/observations?page_token=bm9wZQ", Token: s.Owner}).
		expectProblem(t, http.StatusBadRequest, "invalid_page_token")

	// Another organization's owner sees no agents and none of these observations.
	_, stranger := agentOwner(t, env)
	rep := send(t, env, req{Method: http.MethodGet, Path: agentsPath, Token: stranger})
	var none struct {
		Items []installationJSON `json:"items"`
	}
	rep.decode(t, &none)
	if rep.Status != http.StatusOK || len(none.Items) != 0 {
		t.Errorf("stranger lists agents: %d %s", rep.Status, rep.Body)
	}
	send(t, env, req{Method: http.MethodGet, Path: agentsPath + "/" + s.Agent.ID + "/observations", Token: stranger}).
		expectProblem(t, http.StatusNotFound, "not_found")
}

// TestIntakeBodyLimit: a body over 1 MiB is 413 payload_too_large, signed or not, and nothing
// is stored.
func TestIntakeBodyLimit(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	s := newAgentSetup(t, env)
	big := batchBody("big", 1, 1<<20)
	if len(big) <= 1<<20 {
		t.Fatal("the test body is not over 1 MiB")
	}
	s.Agent.submit(t, big).expectProblem(t, http.StatusRequestEntityTooLarge, "payload_too_large")
	if b, o := storedBatch(t, env, s.Agent.ID, "big"); b != 0 || o != 0 {
		t.Error("an oversized batch was stored")
	}
	// Registration's body is bounded the same way.
	a := newSpecAgent(env)
	send(t, env, req{Method: http.MethodPost, Path: installationsURL, Token: s.Key, Body: jsonBody(map[string]string{
		"installation_id": a.ID, "public_key": a.publicKeyB64(), "hostname": strings.Repeat("h", 1<<20+1), "os": "linux"})}).
		expectProblem(t, http.StatusRequestEntityTooLarge, "payload_too_large")
	// A batch just under the limit is accepted.
	near := batchBody("near", 1, 1<<20-200)
	if len(near) > 1<<20 {
		t.Fatalf("the near-limit body is %d bytes", len(near))
	}
	if r := s.Agent.submit(t, near).accepted(t); r.Duplicate {
		t.Error("near-limit batch taken for a duplicate")
	}
}

// TestObservationRetention: observations older than the organization's
// observation_retention_days are deleted; another organization's, under the default, are kept.
func TestObservationRetention(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, policies := scopedToken(t, env, "policies:write")
	short, long := newAgentSetup(t, env), newAgentSetup(t, env)
	setPolicy(t, env, policies, short.OrgID, map[string]any{"limits": map[string]any{"observation_retention_days": 1}})
	for _, s := range []agentSetup{short, long} {
		s.Agent.submit(t, batchBody("old", 2, 0)).accepted(t)
		s.Agent.submit(t, batchBody("new", 1, 0)).accepted(t)
	}
	ctx := context.Background()
	if _, err := env.Pool.Exec(ctx, `UPDATE observations SET received_at = now() - interval '2 days' WHERE batch_id = 'old'`); err != nil {
		t.Fatal(err)
	}
	purgeRetention(t, env)
	if n := countRows(t, env, `SELECT count(*) FROM observations WHERE organization_id = $1`, short.OrgID); n != 1 {
		t.Errorf("1-day retention: %d observations left, want 1 (the recent one)", n)
	}
	if n := countRows(t, env, `SELECT count(*) FROM observations WHERE organization_id = $1 AND batch_id = 'new'`, short.OrgID); n != 1 {
		t.Error("1-day retention deleted a recent observation")
	}
	if n := countRows(t, env, `SELECT count(*) FROM observations WHERE organization_id = $1`, long.OrgID); n != 3 {
		t.Errorf("default retention: %d observations left, want 3", n)
	}
	if got, _ := listAllObservations(t, env, short.Owner, short.Agent.ID, 100); len(got) != 1 {
		t.Errorf("owner reads %d observations after retention, want 1", len(got))
	}
	// Past the default 90 days, the other organization's go too.
	if _, err := env.Pool.Exec(ctx, `UPDATE observations SET received_at = now() - interval '91 days' WHERE batch_id = 'old'`); err != nil {
		t.Fatal(err)
	}
	purgeRetention(t, env)
	if n := countRows(t, env, `SELECT count(*) FROM observations WHERE organization_id = $1`, long.OrgID); n != 1 {
		t.Errorf("default retention after 91 days: %d observations left, want 1", n)
	}
	// The deduplication log still remembers the purged batch: a late retry is a duplicate.
	if r := short.Agent.submit(t, batchBody("old", 2, 0)).accepted(t); !r.Duplicate {
		t.Error("a retry of a batch whose observations expired was stored again")
	}
}

func purgeRetention(t testing.TB, env *servertest.Env) {
	t.Helper()
	if _, err := domain.PurgeOldObservations(context.Background(), env.Pool, env.Config.PolicyDefaults, time.Now()); err != nil {
		t.Fatal(err)
	}
}
