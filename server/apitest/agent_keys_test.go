package apitest

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// Agent acceptance (issue 5, RFD 23): intake keys. Shared fixtures of the agent_*_test.go files
// live here and in agent_intake_test.go.

const (
	intakeKeysPath   = "/api/v1/org/intake-keys"
	agentsPath       = "/api/v1/org/agents"
	orgJobsPath      = "/api/v1/org/jobs"
	homePath         = "/api/v1/agent/home"
	installationsURL = "/api/v1/agent/installations"
	observationsURL  = "/api/v1/agent/observations"
	agentJobsURL     = "/api/v1/agent/jobs"
)

func agentResultURL(jobID string) string { return agentJobsURL + "/" + jobID + "/result" }

// agentOwner makes an organization with an owner and returns its ID and the owner's personal
// API key (ownerKey, keeping the organization's ID).
func agentOwner(t testing.TB, env *servertest.Env) (orgID, apiKey string) {
	t.Helper()
	ctx := context.Background()
	o, err := domain.CreateOrganization(ctx, env.Pool, newSlug(), "Agents "+random(3))
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := domain.CreateInvitation(ctx, env.Pool, o.ID, newSlug()+"@example.com")
	if err != nil {
		t.Fatal(err)
	}
	agentTrack(env, secret)
	a, err := domain.AcceptInvitation(ctx, env.Pool, secret, "Owner", domain.BuiltinDefaults)
	if err != nil {
		t.Fatal(err)
	}
	agentTrack(env, a.APIKey)
	scanAgentTables(t, env)
	return o.ID, a.APIKey
}

// The suite's secret scan (servertest) reads the logs and the audit, Activity, job, idempotency
// and credential tables. Agent tests also look in the tables agents write: observations, their
// deduplication log, jobs and usage. agentTrack registers a secret with both scans.
var agentSecrets sync.Map // *servertest.Env → *agentSecretList

type agentSecretList struct {
	mu       sync.Mutex
	secrets  []string
	scanning bool // the end-of-test scan is registered
}

func agentSecretsOf(env *servertest.Env) *agentSecretList {
	v, _ := agentSecrets.LoadOrStore(env, &agentSecretList{})
	list, _ := v.(*agentSecretList)
	return list
}

func agentTrack(env *servertest.Env, secrets ...string) {
	env.Track(secrets...)
	l := agentSecretsOf(env)
	l.mu.Lock()
	l.secrets = append(l.secrets, secrets...)
	l.mu.Unlock()
}

// scanAgentTables registers, once per env, the scan of the agents' tables when t ends (before
// the pool closes: cleanups run last registered first).
func scanAgentTables(t testing.TB, env *servertest.Env) {
	l := agentSecretsOf(env)
	l.mu.Lock()
	already := l.scanning
	l.scanning = true
	l.mu.Unlock()
	if already {
		return
	}
	t.Cleanup(func() {
		defer agentSecrets.Delete(env)
		var dump strings.Builder
		for _, table := range []string{"observations", "observation_batches", "jobs", "usage_events", "usage_counters"} {
			rows, err := env.Pool.Query(context.Background(), `SELECT row_to_json(t)::text FROM `+table+` t`)
			if err != nil {
				t.Errorf("agent secret scan: %s: %v", table, err)
				return
			}
			for rows.Next() {
				var s string
				if err := rows.Scan(&s); err != nil {
					t.Errorf("agent secret scan: %s: %v", table, err)
				}
				dump.WriteString(s)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				t.Errorf("agent secret scan: %s: %v", table, err) // a failed read must fail, not empty the scan
				return
			}
		}
		all := dump.String()
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, s := range l.secrets {
			if strings.Contains(all, s) {
				t.Errorf("agent secret scan: a secret (%s...) appears in the agents' tables", s[:min(len(s), 16)])
			}
		}
	})
}

// intakeKeyJSON is an intake key as the owner API shows it; Key only when shown once.
type intakeKeyJSON struct {
	ID         string  `json:"id"`
	Name       string  `json:"name"`
	Identifier *string `json:"identifier"`
	CreatedAt  string  `json:"created_at"`
	RevokedAt  *string `json:"revoked_at"`
	Key        string  `json:"key"`
}

// keySecretPart is the secret after the last "_" of an intake key.
func keySecretPart(key string) string { return key[strings.LastIndexByte(key, '_')+1:] }

// trackKey registers an intake key, and its secret part alone, with the secret scan.
func trackKey(env *servertest.Env, key string) {
	if key != "" {
		agentTrack(env, key, keySecretPart(key))
	}
}

// createIntakeKey creates an intake key on srv (a server on env's database) and tracks it.
func createIntakeKey(t testing.TB, env, srv *servertest.Env, owner, name string) intakeKeyJSON {
	t.Helper()
	rep := send(t, srv, req{Method: http.MethodPost, Path: intakeKeysPath, Token: owner,
		Body: jsonBody(map[string]string{"name": name}), Header: headers("Idempotency-Key", newKey())})
	var k intakeKeyJSON
	if rep.Status == http.StatusCreated {
		rep.decode(t, &k)
	}
	trackKey(env, k.Key)
	if rep.Status != http.StatusCreated || k.Key == "" {
		t.Fatalf("create intake key: %d %s", rep.Status, rep.Body)
	}
	return k
}

// intakeKeyList is GET /api/v1/org/intake-keys.
type intakeKeyList struct {
	DeploymentIdentifier *string         `json:"deployment_identifier"`
	Items                []intakeKeyJSON `json:"items"`
	NextPageToken        *string         `json:"next_page_token"`
}

func listIntakeKeys(t testing.TB, srv *servertest.Env, owner string) (intakeKeyList, []byte) {
	t.Helper()
	rep := send(t, srv, req{Method: http.MethodGet, Path: intakeKeysPath, Token: owner})
	if rep.Status != http.StatusOK {
		t.Fatalf("list intake keys: %d %s", rep.Status, rep.Body)
	}
	var l intakeKeyList
	rep.decode(t, &l)
	return l, rep.Body
}

// sibling starts a second server on env's database with the configuration changed by opt, as
// an operator restarting the deployment with a new setting would. It logs into env's logs, so
// that the secret scan covers it too.
func sibling(t testing.TB, env *servertest.Env, opt servertest.Option) *servertest.Env {
	t.Helper()
	cfg := env.Config
	opt(&cfg)
	log := slog.New(slog.NewJSONHandler(env.Logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := server.New(cfg, env.Pool, log)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return &servertest.Env{URL: ts.URL, Pool: env.Pool, Server: s, Config: cfg, Logs: env.Logs, DBURL: env.DBURL}
}

func withDeploymentID(id string) servertest.Option {
	return func(c *server.Config) { c.DeploymentID = id }
}

// registerReq is POST /api/v1/agent/installations for agent a with intake key key.
func registerReq(key string, a *specAgent) req {
	return req{Method: http.MethodPost, Path: installationsURL, Token: key, Body: jsonBody(map[string]string{
		"installation_id": a.ID, "public_key": a.publicKeyB64(), "hostname": "host-" + a.ID[4:10], "os": "linux"})}
}

// register registers a fresh agent with key on srv and fails the test unless it is created.
func register(t testing.TB, env, srv *servertest.Env, key string) *specAgent {
	t.Helper()
	a := newSpecAgent(env)
	rep := send(t, srv, registerReq(key, a))
	if rep.Status != http.StatusCreated {
		t.Fatalf("register installation: %d %s", rep.Status, rep.Body)
	}
	return a
}

var (
	plainKeyRE = regexp.MustCompile(`^renga_intake_[a-z2-7]{52}$`)
	eu1KeyRE   = regexp.MustCompile(`^renga_intake_eu1_[a-z2-7]{52}$`)
)

// TestIntakeKeyFormatAndAuthentication is the key format and authentication table of RFD 23:
// keys carry the deployment identifier in the open, and authentication never trusts it.
func TestIntakeKeyFormatAndAuthentication(t *testing.T) {
	t.Parallel()
	plain := servertest.Start(t) // no deployment identifier
	_, owner := agentOwner(t, plain)

	// Issued before the deployment had an identifier.
	before := createIntakeKey(t, plain, plain, owner, "before")
	if !plainKeyRE.MatchString(before.Key) {
		t.Errorf("key without an identifier = %q, want renga_intake_<52 base32>", before.Key[:20])
	}
	if before.Identifier != nil {
		t.Errorf("key issued without an identifier reports identifier %q", *before.Identifier)
	}
	if l, _ := listIntakeKeys(t, plain, owner); l.DeploymentIdentifier != nil {
		t.Errorf("deployment without an identifier lists deployment_identifier %q", *l.DeploymentIdentifier)
	}

	// The operator sets RENGA_DEPLOYMENT_ID=eu1 and restarts on the same database.
	eu1 := sibling(t, plain, withDeploymentID("eu1"))
	after := createIntakeKey(t, plain, eu1, owner, "after")
	if !eu1KeyRE.MatchString(after.Key) {
		t.Errorf("key with identifier eu1 = %q..., want renga_intake_eu1_<52 base32>", after.Key[:20])
	}
	if after.Identifier == nil || *after.Identifier != "eu1" {
		t.Errorf("key issued with identifier eu1 reports identifier %v", after.Identifier)
	}
	list, raw := listIntakeKeys(t, eu1, owner)
	if list.DeploymentIdentifier == nil || *list.DeploymentIdentifier != "eu1" {
		t.Errorf("deployment_identifier = %v, want eu1", list.DeploymentIdentifier)
	}
	byID := map[string]intakeKeyJSON{}
	for _, k := range list.Items {
		byID[k.ID] = k
		if k.Key != "" {
			t.Errorf("the list shows key %s's secret", k.ID)
		}
	}
	if k, ok := byID[before.ID]; !ok || k.Identifier != nil {
		t.Errorf("pre-identifier key listed as %+v (present %v), want identifier null", k, ok)
	}
	if k, ok := byID[after.ID]; !ok || k.Identifier == nil || *k.Identifier != "eu1" {
		t.Errorf("eu1 key listed as %+v (present %v), want identifier eu1", k, ok)
	}
	// identifier is present (as null) for the old key, not left out.
	var rawList struct {
		Items []map[string]json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &rawList); err != nil || len(rawList.Items) == 0 {
		t.Fatalf("intake key list: %v, %d items: %s", err, len(rawList.Items), raw)
	}
	for _, k := range rawList.Items {
		if v, ok := k["identifier"]; !ok {
			t.Errorf("list item without an identifier member: %v", k)
		} else if string(k["id"]) == `"`+before.ID+`"` && string(v) != "null" {
			t.Errorf("pre-identifier key's identifier = %s, want null", v)
		}
	}

	secret := keySecretPart(after.Key)
	otherSecret := domain.NewSecret()
	env := plain
	agentTrack(env, otherSecret)
	flipped := []byte(secret)
	if flipped[10] == 'a' {
		flipped[10] = 'b'
	} else {
		flipped[10] = 'a'
	}
	table := []struct {
		name string
		key  string
		want int
	}{
		{"as issued", after.Key, http.StatusCreated},
		{"wrong identifier, right secret", "renga_intake_us2_" + secret, http.StatusCreated},
		{"missing identifier, right secret", "renga_intake_" + secret, http.StatusCreated},
		// The identifier's shape: 1 to 16 characters. Fails when: len(id) < 1 or len(id) > 16
		// (intake_key.go, LooksLikeIntakeKey) is made <= or >=.
		{"one-character identifier, right secret", "renga_intake_a_" + secret, http.StatusCreated},
		{"16-character identifier, right secret", "renga_intake_" + strings.Repeat("a", 16) + "_" + secret, http.StatusCreated},
		{"17-character identifier, right secret", "renga_intake_" + strings.Repeat("a", 17) + "_" + secret, http.StatusUnauthorized},
		{"empty identifier, right secret", "renga_intake__" + secret, http.StatusUnauthorized},
		{"right identifier, wrong secret", "renga_intake_eu1_" + otherSecret, http.StatusUnauthorized},
		{"right identifier, one character of the secret changed", "renga_intake_eu1_" + string(flipped), http.StatusUnauthorized},
		{"pre-identifier key after the identifier is set", before.Key, http.StatusCreated},
		{"pre-identifier key given the deployment's identifier", "renga_intake_eu1_" + keySecretPart(before.Key), http.StatusCreated},
		{"secret alone", secret, http.StatusUnauthorized},
		{"no key", "", http.StatusUnauthorized},
		{"another credential type's prefix", "renga_user_" + secret, http.StatusUnauthorized},
	}
	for _, tc := range table {
		for _, srv := range []*servertest.Env{eu1, plain} {
			a := newSpecAgent(env)
			rep := send(t, srv, registerReq(tc.key, a))
			if rep.Status != tc.want {
				t.Errorf("%s (server identifier %q): %d %s, want %d", tc.name, srv.Config.DeploymentID, rep.Status, rep.Body, tc.want)
			}
			if tc.want == http.StatusUnauthorized {
				if rep.Status == http.StatusUnauthorized {
					rep.expectProblem(t, http.StatusUnauthorized, "unauthenticated")
				}
				if n := countRows(t, env, `SELECT count(*) FROM installations WHERE id = $1`, a.ID); n != 0 {
					t.Errorf("%s: a refused registration stored the installation", tc.name)
				}
			}
		}
	}

	// Rotation gives the key the identifier and revokes the old one at once.
	rep := send(t, eu1, req{Method: http.MethodPost, Path: intakeKeysPath + "/" + before.ID + "/rotate", Token: owner,
		Header: headers("Idempotency-Key", newKey())})
	var rotated intakeKeyJSON
	if rep.Status == http.StatusCreated {
		rep.decode(t, &rotated)
		trackKey(env, rotated.Key)
	} else {
		t.Fatalf("rotate: %d %s", rep.Status, rep.Body)
	}
	if !eu1KeyRE.MatchString(rotated.Key) {
		t.Errorf("rotated key = %q..., want renga_intake_eu1_<52 base32>", rotated.Key[:min(20, len(rotated.Key))])
	}
	if rotated.Identifier == nil || *rotated.Identifier != "eu1" || rotated.Name != "before" || rotated.ID == before.ID {
		t.Errorf("rotated key = %+v, want a new key named before carrying eu1", rotated)
	}
	register(t, env, eu1, rotated.Key)
	send(t, eu1, registerReq(before.Key, newSpecAgent(env))).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	send(t, eu1, registerReq("renga_intake_"+keySecretPart(before.Key), newSpecAgent(env))).
		expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	list, _ = listIntakeKeys(t, eu1, owner)
	for _, k := range list.Items {
		if k.ID == before.ID && k.RevokedAt == nil {
			t.Error("the rotated key is not listed as revoked")
		}
	}
	// Rotating a revoked key is 409 invalid_state.
	send(t, eu1, req{Method: http.MethodPost, Path: intakeKeysPath + "/" + before.ID + "/rotate", Token: owner,
		Header: headers("Idempotency-Key", newKey())}).expectProblem(t, http.StatusConflict, "invalid_state")

	// Revocation: the key stops authenticating at once, in every spelling; revoking again is success.
	for i := 0; i < 2; i++ {
		rep := send(t, eu1, req{Method: http.MethodDelete, Path: intakeKeysPath + "/" + after.ID, Token: owner})
		var k intakeKeyJSON
		if rep.Status != http.StatusOK {
			t.Fatalf("revoke (%d): %d %s", i, rep.Status, rep.Body)
		}
		rep.decode(t, &k)
		if k.RevokedAt == nil || k.Key != "" {
			t.Errorf("revoked key = %+v", k)
		}
	}
	for _, k := range []string{after.Key, "renga_intake_us2_" + secret, "renga_intake_" + secret} {
		send(t, eu1, registerReq(k, newSpecAgent(env))).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	}
	// Installations registered with a revoked key keep their own identity.
	if n := countRows(t, env, `SELECT count(*) FROM installations WHERE intake_key_id = $1`, after.ID); n == 0 {
		t.Error("no installation was registered with the revoked key")
	}
}

// TestIntakeKeyShownOnce: a replayed createIntakeKey (same Idempotency-Key) answers the same key
// object without its secret, and creates nothing more.
func TestIntakeKeyShownOnce(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, withDeploymentID("eu1"))
	_, owner := agentOwner(t, env)
	idem := newKey()
	r := req{Method: http.MethodPost, Path: intakeKeysPath, Token: owner, Body: jsonBody(map[string]string{"name": "once"}),
		Header: headers("Idempotency-Key", idem)}
	first := send(t, env, r)
	var k intakeKeyJSON
	first.decode(t, &k)
	trackKey(env, k.Key)
	if first.Status != http.StatusCreated || !eu1KeyRE.MatchString(k.Key) {
		t.Fatalf("create: %d %s", first.Status, first.Body)
	}
	for i := 0; i < 2; i++ {
		again := send(t, env, r)
		if again.Status != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("replay: %d, Idempotent-Replayed %q: %s", again.Status, again.Header.Get("Idempotent-Replayed"), again.Body)
		}
		var members map[string]json.RawMessage
		again.decode(t, &members)
		if _, has := members["key"]; has {
			t.Errorf("the replay shows the key's secret again: %s", again.Body)
		}
		if string(members["id"]) != `"`+k.ID+`"` || string(members["identifier"]) != `"eu1"` || string(members["name"]) != `"once"` {
			t.Errorf("the replay is not the same key object: %s", again.Body)
		}
		if strings.Contains(string(again.Body), keySecretPart(k.Key)) {
			t.Error("the replay carries the secret")
		}
	}
	if n := countRows(t, env, `SELECT count(*) FROM intake_keys WHERE name = 'once'`); n != 1 {
		t.Errorf("%d keys stored, want 1", n)
	}
	// The key shown the first time works.
	register(t, env, env, k.Key)
}
