package apitest

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/domain/policyfield"
	"renga.dev/renga/server/secretbox"
	"renga.dev/renga/server/servertest"
)

func policyPath(orgID string) string { return orgPath(orgID) + "/policy" }

// putPolicyReq is PUT .../policy; ifMatch "" sends no If-Match.
func putPolicyReq(token, orgID, ifMatch string, doc any) req {
	r := req{Method: http.MethodPut, Path: policyPath(orgID), Token: token, Body: jsonBody(doc), Header: http.Header{}}
	if ifMatch != "" {
		r.Header.Set("If-Match", ifMatch)
	}
	return r
}

// putPolicy replaces the policy and fails the test unless it is stored.
func putPolicy(t testing.TB, env *servertest.Env, token, orgID, ifMatch string, doc any) reply {
	t.Helper()
	rep := send(t, env, putPolicyReq(token, orgID, ifMatch, doc))
	if rep.Status != http.StatusOK {
		t.Fatalf("PUT policy: %d %s", rep.Status, rep.Body)
	}
	return rep
}

// policyJSON is a policy document as read, sections kept raw so that absent fields show.
type policyJSON struct {
	OrganizationID string           `json:"organization_id"`
	Limits         map[string]int64 `json:"limits"`
	LockedSettings map[string]any   `json:"locked_settings"`
	Entitlements   map[string]bool  `json:"entitlements"`
	Version        int64            `json:"version"`
}

func getPolicy(t testing.TB, env *servertest.Env, token, orgID string) (policyJSON, string) {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodGet, Path: policyPath(orgID), Token: token})
	if rep.Status != http.StatusOK {
		t.Fatalf("GET policy: %d %s", rep.Status, rep.Body)
	}
	var p policyJSON
	rep.decode(t, &p)
	return p, rep.Header.Get("ETag")
}

// sourced is an effective value with its source.
type sourced struct {
	Value  any    `json:"value"`
	Source string `json:"source"`
}

// effectiveJSON is GET .../policy/effective, flattened to "section.field" keys.
func getEffective(t testing.TB, env *servertest.Env, token, orgID string) map[string]sourced {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodGet, Path: policyPath(orgID) + "/effective", Token: token})
	if rep.Status != http.StatusOK {
		t.Fatalf("GET effective policy: %d %s", rep.Status, rep.Body)
	}
	var e struct {
		OrganizationID string             `json:"organization_id"`
		Limits         map[string]sourced `json:"limits"`
		Entitlements   map[string]sourced `json:"entitlements"`
		Settings       map[string]sourced `json:"settings"`
	}
	rep.decode(t, &e)
	if e.OrganizationID != orgID {
		t.Errorf("effective policy organization_id = %q, want %s", e.OrganizationID, orgID)
	}
	out := map[string]sourced{}
	for section, m := range map[string]map[string]sourced{"limits": e.Limits, "entitlements": e.Entitlements, "settings": e.Settings} {
		for k, v := range m {
			out[section+"."+k] = v
		}
	}
	if len(out) != 12 {
		t.Errorf("effective policy has %d values, want 12: %s", len(out), rep.Body)
	}
	return out
}

// expectEffective asserts values and sources; a nil want value checks the source only.
func expectEffective(t testing.TB, got map[string]sourced, want map[string]sourced) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("effective %s missing", k)
			continue
		}
		if g.Source != w.Source {
			t.Errorf("effective %s source = %q, want %q (value %v)", k, g.Source, w.Source, g.Value)
		}
		if w.Value != nil && string(jsonBody(g.Value)) != string(jsonBody(w.Value)) {
			t.Errorf("effective %s = %s, want %s (source %s)", k, jsonBody(g.Value), jsonBody(w.Value), g.Source)
		}
	}
}

// settingsReq is PUT /api/v1/org/settings with the owner's key; ifMatch "" sends none.
func settingsReq(key, ifMatch string, doc any) req {
	r := req{Method: http.MethodPut, Path: settingsPath, Token: key, Body: jsonBody(doc), Header: http.Header{}}
	if ifMatch != "" {
		r.Header.Set("If-Match", ifMatch)
	}
	return r
}

// settingsJSON is the owners' settings as read.
type settingsJSON struct {
	RequireSSO          bool           `json:"require_sso"`
	RequireMFA          bool           `json:"require_mfa"`
	SessionMaxAgeHours  int64          `json:"session_max_age_hours"`
	AllowedEmailDomains []string       `json:"allowed_email_domains"`
	Locked              map[string]any `json:"locked"`
	Version             int64          `json:"version"`
}

func getSettings(t testing.TB, env *servertest.Env, key string) (settingsJSON, string) {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodGet, Path: settingsPath, Token: key})
	if rep.Status != http.StatusOK {
		t.Fatalf("GET settings: %d %s", rep.Status, rep.Body)
	}
	var s settingsJSON
	rep.decode(t, &s)
	return s, rep.Header.Get("ETag")
}

// TestPolicyDocument: PUT needs If-Match (428), refuses a stale one (412 with the current
// version), replaces the document whole (a field left out takes its default), and the effective
// view names each value's source.
func TestPolicyDocument(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, op := scopedToken(t, env, "organizations:write", "policies:write")
	org := createOrg(t, env, op, "acme", "Acme")

	p, etag := getPolicy(t, env, op, org.ID)
	if etag != `"1"` || p.Version != 1 || p.OrganizationID != org.ID || len(p.Limits)+len(p.Entitlements)+len(p.LockedSettings) != 0 {
		t.Fatalf("a new organization's policy = %+v (ETag %s), want empty version 1", p, etag)
	}
	// Before any organization value: everything from the deployment, settings the owners'.
	expectEffective(t, getEffective(t, env, op, org.ID), map[string]sourced{
		"limits.max_agents":                            {1000, "deployment"},
		"limits.max_users":                             {100, "deployment"},
		"limits.intake_bytes_per_day":                  {10 << 30, "deployment"},
		"limits.observation_retention_days":            {90, "deployment"},
		"limits.max_jobs_per_day":                      {10000, "deployment"},
		"entitlements.organization_identity_providers": {true, "deployment"},
		"entitlements.jobs":                            {true, "deployment"},
		"entitlements.owner_export":                    {false, "deployment"},
		"settings.require_sso":                         {false, "owner"},
		"settings.require_mfa":                         {false, "owner"},
		"settings.session_max_age_hours":               {24, "owner"},
		"settings.allowed_email_domains":               {[]string{}, "owner"},
	})

	full := map[string]any{
		"limits":          map[string]any{"max_agents": 5, "max_users": 3},
		"locked_settings": map[string]any{"require_sso": true, "allowed_email_domains": []string{"b.example", "a.example"}},
		"entitlements":    map[string]any{"jobs": false},
	}
	rep := send(t, env, putPolicyReq(op, org.ID, "", full))
	rep.expectProblem(t, http.StatusPreconditionRequired, "precondition_required")
	send(t, env, putPolicyReq(op, org.ID, "*", full)).expectProblem(t, http.StatusPreconditionRequired, "precondition_required")
	if p, _ := getPolicy(t, env, op, org.ID); p.Version != 1 {
		t.Fatalf("a refused PUT changed the policy: %+v", p)
	}

	rep = putPolicy(t, env, op, org.ID, `"1"`, full)
	if rep.Header.Get("ETag") != `"2"` {
		t.Errorf("ETag after PUT = %q, want \"2\"", rep.Header.Get("ETag"))
	}
	// A stale version: 412 naming the current one, nothing changed.
	pb := send(t, env, putPolicyReq(op, org.ID, `"1"`, map[string]any{})).expectProblem(t, http.StatusPreconditionFailed, "version_mismatch")
	if pb.CurrentVersion == nil || *pb.CurrentVersion != 2 {
		t.Errorf("412 current_version = %v, want 2", pb.CurrentVersion)
	}
	send(t, env, putPolicyReq(op, org.ID, `W/"2"`, map[string]any{})).expectProblem(t, http.StatusPreconditionFailed, "version_mismatch")

	expectEffective(t, getEffective(t, env, op, org.ID), map[string]sourced{
		"limits.max_agents":                            {5, "organization"},
		"limits.max_users":                             {3, "organization"},
		"limits.intake_bytes_per_day":                  {10 << 30, "deployment"},
		"entitlements.jobs":                            {false, "organization"},
		"entitlements.organization_identity_providers": {true, "deployment"},
		"settings.require_sso":                         {true, "organization"},
		"settings.allowed_email_domains":               {[]string{"a.example", "b.example"}, "organization"},
		"settings.require_mfa":                         {false, "owner"},
		"settings.session_max_age_hours":               {24, "owner"},
	})

	// A field left out of the next PUT takes its default, not its old value.
	putPolicy(t, env, op, org.ID, `"2"`, map[string]any{"limits": map[string]any{"max_users": 3}})
	p, etag = getPolicy(t, env, op, org.ID)
	if etag != `"3"` || p.Version != 3 {
		t.Errorf("policy after the second PUT: version %d, ETag %s", p.Version, etag)
	}
	if _, ok := p.Limits["max_agents"]; ok || p.Limits["max_users"] != 3 || len(p.Entitlements) != 0 || len(p.LockedSettings) != 0 {
		t.Errorf("policy after a PUT leaving fields out = %+v, want only limits.max_users", p)
	}
	expectEffective(t, getEffective(t, env, op, org.ID), map[string]sourced{
		"limits.max_agents":              {1000, "deployment"},
		"limits.max_users":               {3, "organization"},
		"entitlements.jobs":              {true, "deployment"},
		"settings.require_sso":           {false, "owner"},
		"settings.allowed_email_domains": {[]string{}, "owner"},
	})

	// Bad values are refused field by field.
	pb = send(t, env, putPolicyReq(op, org.ID, `"3"`, map[string]any{"limits": map[string]any{"max_users": 0}})).
		expectProblem(t, http.StatusBadRequest, "invalid_request")
	if len(pb.Errors) == 0 || !strings.Contains(pb.Errors[0].Field, "max_users") {
		t.Errorf("errors = %+v, want limits.max_users", pb.Errors)
	}
	send(t, env, putPolicyReq(op, org.ID, `"3"`, map[string]any{"limits": map[string]any{"max_cars": 1}})).
		expectProblem(t, http.StatusBadRequest, "invalid_request")

	// Each successful PUT is audited with the fields it changed.
	rows, err := env.Pool.Query(context.Background(), `SELECT changed_fields FROM audit_events
		WHERE operation = 'putPolicy' AND outcome = 'succeeded' AND organization_id = $1 ORDER BY id`, org.ID)
	if err != nil {
		t.Fatal(err)
	}
	var changed [][]string
	for rows.Next() {
		var c []string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		changed = append(changed, c)
	}
	if len(changed) != 2 || !slices.Contains(changed[0], "limits.max_agents") || !slices.Contains(changed[1], "limits.max_agents") ||
		slices.Contains(changed[1], "limits.max_users") {
		t.Errorf("putPolicy audit changed_fields = %v", changed)
	}
	if n := countRows(t, env, `SELECT count(*) FROM organization_activity WHERE organization_id = $1 AND operation = 'putPolicy'`, org.ID); n != 2 {
		t.Errorf("%d putPolicy Activity rows, want 2", n)
	}
}

// TestPolicyOwnerSettings: an owner cannot change a setting the policy locks (409
// setting_locked) but changes an unlocked one, with If-Match; the effective view then names the
// owner as the source.
func TestPolicyOwnerSettings(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, op := scopedToken(t, env, "organizations:write", "policies:write")
	org := createOrg(t, env, op, "acme", "Acme")
	owner := addOwner(t, env, op, org.ID, "olivia@acme.example", "Olivia")
	putPolicy(t, env, op, org.ID, `"1"`, map[string]any{"locked_settings": map[string]any{"require_sso": true}})

	s, etag := getSettings(t, env, owner.APIKey)
	if etag != `"1"` || s.Version != 1 || s.SessionMaxAgeHours != 24 || s.RequireMFA || s.Locked["require_sso"] != true {
		t.Fatalf("settings = %+v (ETag %s)", s, etag)
	}
	if _, ok := s.Locked["require_mfa"]; ok {
		t.Errorf("require_mfa shows as locked: %+v", s.Locked)
	}

	send(t, env, settingsReq(owner.APIKey, "", map[string]any{"require_mfa": true})).
		expectProblem(t, http.StatusPreconditionRequired, "precondition_required")
	pb := send(t, env, settingsReq(owner.APIKey, `"1"`, map[string]any{"require_sso": false, "require_mfa": true})).
		expectProblem(t, http.StatusConflict, "setting_locked")
	if len(pb.Errors) != 1 || pb.Errors[0].Field != "require_sso" {
		t.Errorf("setting_locked errors = %+v, want require_sso", pb.Errors)
	}
	if s, _ := getSettings(t, env, owner.APIKey); s.Version != 1 || s.RequireMFA {
		t.Fatalf("a refused settings PUT changed them: %+v", s)
	}

	rep := send(t, env, settingsReq(owner.APIKey, `"1"`, map[string]any{"require_mfa": true, "session_max_age_hours": 8}))
	if rep.Status != http.StatusOK || rep.Header.Get("ETag") != `"2"` {
		t.Fatalf("PUT an unlocked setting: %d %s", rep.Status, rep.Body)
	}
	send(t, env, settingsReq(owner.APIKey, `"1"`, map[string]any{})).expectProblem(t, http.StatusPreconditionFailed, "version_mismatch")
	if s, _ := getSettings(t, env, owner.APIKey); !s.RequireMFA || s.SessionMaxAgeHours != 8 || s.Version != 2 {
		t.Errorf("settings after PUT = %+v", s)
	}
	expectEffective(t, getEffective(t, env, op, org.ID), map[string]sourced{
		"settings.require_sso":           {true, "organization"},
		"settings.require_mfa":           {true, "owner"},
		"settings.session_max_age_hours": {8, "owner"},
		"settings.allowed_email_domains": {[]string{}, "owner"},
	})
	// The owner's change is in the organization's Activity, attributed to them.
	if acts := findActivity(listActivity(t, env, owner.APIKey), "putSettings"); len(acts) != 1 || acts[0].Actor.Type != "user" ||
		acts[0].Actor.ID != owner.User.ID || !slices.Equal(acts[0].ChangedFields, []string{"require_mfa", "session_max_age_hours"}) {
		t.Errorf("putSettings Activity = %+v", acts)
	}
}

// TestPolicyDeploymentDefaults: RENGA_POLICY_DEFAULTS values show with source deployment, an
// organization's own value overrides them, and a setting the deployment locks is locked for
// the owners.
func TestPolicyDeploymentDefaults(t *testing.T) {
	t.Parallel()
	defaults, err := domain.ParsePolicyDefaults(`{"limits": {"max_agents": 7}, "locked_settings": {"require_mfa": true},
		"entitlements": {"owner_export": true}}`)
	if err != nil {
		t.Fatal(err)
	}
	env := servertest.Start(t, func(c *server.Config) { c.PolicyDefaults = defaults })
	_, op := scopedToken(t, env, "organizations:write", "policies:write")
	org := createOrg(t, env, op, "acme", "Acme")
	owner := addOwner(t, env, op, org.ID, "olivia@acme.example", "Olivia")

	expectEffective(t, getEffective(t, env, op, org.ID), map[string]sourced{
		"limits.max_agents":         {7, "deployment"},
		"limits.max_users":          {100, "deployment"},
		"entitlements.owner_export": {true, "deployment"},
		"settings.require_mfa":      {true, "deployment"},
		"settings.require_sso":      {false, "owner"},
	})
	putPolicy(t, env, op, org.ID, `"1"`, map[string]any{"limits": map[string]any{"max_agents": 9},
		"entitlements": map[string]any{"owner_export": false}})
	expectEffective(t, getEffective(t, env, op, org.ID), map[string]sourced{
		"limits.max_agents":         {9, "organization"},
		"entitlements.owner_export": {false, "organization"},
		"settings.require_mfa":      {true, "deployment"},
	})
	if s, _ := getSettings(t, env, owner.APIKey); s.Locked["require_mfa"] != true {
		t.Errorf("settings do not show the deployment's lock: %+v", s.Locked)
	}
	send(t, env, settingsReq(owner.APIKey, `"1"`, map[string]any{"require_mfa": false})).
		expectProblem(t, http.StatusConflict, "setting_locked")
	if rep := send(t, env, settingsReq(owner.APIKey, `"1"`, map[string]any{"require_sso": true})); rep.Status != http.StatusOK {
		t.Errorf("PUT an unlocked setting under deployment locks: %d %s", rep.Status, rep.Body)
	}
}

// TestPolicyDefaultsRefuseBoot: a RENGA_POLICY_DEFAULTS that is not a valid policy document
// refuses boot with an error naming the variable.
func TestPolicyDefaultsRefuseBoot(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"RENGA_DATABASE_URL":    "postgres://renga@db.example/renga",
		"RENGA_PUBLIC_URL":      "https://renga.example.com",
		"RENGA_TRUSTED_PROXIES": "10.0.0.0/8",
		"RENGA_SMTP_URL":        "smtp://mail.example:25",
		"RENGA_SECRET_KEY":      secretbox.NewKey(),
	}
	getenv := func(defaults string) func(string) string {
		return func(k string) string {
			if k == "RENGA_POLICY_DEFAULTS" {
				return defaults
			}
			return base[k]
		}
	}
	// The base configuration boots, with and without valid defaults.
	c, err := server.LoadConfig(getenv(`{"limits": {"max_users": 5}}`), server.ModeServe)
	if err != nil {
		t.Fatalf("valid configuration refused: %v", err)
	}
	if c.PolicyDefaults[policyfield.MaxUsers] != int64(5) || c.PolicyDefaults[policyfield.MaxAgents] != int64(1000) {
		t.Errorf("policy defaults = %+v", c.PolicyDefaults)
	}
	if _, err := server.LoadConfig(getenv(""), server.ModeServe); err != nil {
		t.Fatalf("configuration without defaults refused: %v", err)
	}
	for name, value := range map[string]string{
		"bad JSON":                `{"limits": {"max_users": 5}`,
		"not an object":           `[1, 2]`,
		"unknown section":         `{"quotas": {}}`,
		"unknown field":           `{"limits": {"max_cars": 5}}`,
		"unknown locked setting":  `{"locked_settings": {"require_passkeys": true}}`,
		"wrong type":              `{"limits": {"max_users": "many"}}`,
		"out of range":            `{"limits": {"max_users": 0}}`,
		"trailing data":           `{} {}`,
		"unknown entitlement key": `{"entitlements": {"teleport": true}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := server.LoadConfig(getenv(value), server.ModeServe)
			if err == nil {
				t.Fatalf("RENGA_POLICY_DEFAULTS=%s accepted", value)
			}
			if !strings.Contains(err.Error(), "RENGA_POLICY_DEFAULTS") {
				t.Errorf("error %q does not name RENGA_POLICY_DEFAULTS", err)
			}
			if vars := configVariables(err); !slices.Equal(vars, []string{"RENGA_POLICY_DEFAULTS"}) {
				t.Errorf("ConfigError variables = %v, want only RENGA_POLICY_DEFAULTS", vars)
			}
		})
	}
}

// TestPolicyMaxUsers: max_users blocks the acceptance that would exceed it with 403
// limit_exceeded, creating nothing; lowering it below the current owners deletes nobody.
func TestPolicyMaxUsers(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, op := scopedToken(t, env, "organizations:write", "policies:write")
	org := createOrg(t, env, op, "acme", "Acme")
	putPolicy(t, env, op, org.ID, `"1"`, map[string]any{"limits": map[string]any{"max_users": 1}})
	first := addOwner(t, env, op, org.ID, "first@acme.example", "First")

	inv := invite(t, env, op, org.ID, "second@acme.example")
	secret := outboxSecret(t, env, org.ID, inv.ID)
	send(t, env, acceptReq(secret, "Second")).expectProblem(t, http.StatusForbidden, "limit_exceeded")
	if n := countRows(t, env, `SELECT count(*) FROM users WHERE email = 'second@acme.example'`); n != 0 {
		t.Errorf("the refused acceptance created a user")
	}
	if n := countRows(t, env, `SELECT count(*) FROM memberships WHERE organization_id = $1`, org.ID); n != 1 {
		t.Errorf("%d memberships after the refused acceptance, want 1", n)
	}
	if n := countRows(t, env, `SELECT count(*) FROM user_api_keys`); n != 1 {
		t.Errorf("%d API keys after the refused acceptance, want 1", n)
	}
	if got, raw := getInvitation(t, env, op, org.ID, inv.ID); got.State != "pending" || got.AcceptedAt != nil {
		t.Errorf("the refused invitation = %s, want still pending", raw)
	}

	// Raised, the same invitation is accepted.
	putPolicy(t, env, op, org.ID, `"2"`, map[string]any{"limits": map[string]any{"max_users": 2}})
	second := accept(t, env, secret, "Second")

	// Lowered below the two owners: nobody is removed, both keys keep working, and nobody new
	// joins.
	putPolicy(t, env, op, org.ID, `"3"`, map[string]any{"limits": map[string]any{"max_users": 1}})
	if n := countRows(t, env, `SELECT count(*) FROM memberships WHERE organization_id = $1`, org.ID); n != 2 {
		t.Errorf("%d memberships after lowering max_users, want 2", n)
	}
	for _, key := range []string{first.APIKey, second.APIKey} {
		if rep := send(t, env, req{Method: http.MethodGet, Path: mePath, Token: key}); rep.Status != http.StatusOK {
			t.Errorf("an owner's key after lowering max_users: %d %s", rep.Status, rep.Body)
		}
	}
	third := invite(t, env, op, org.ID, "third@acme.example")
	send(t, env, acceptReq(outboxSecret(t, env, org.ID, third.ID), "Third")).expectProblem(t, http.StatusForbidden, "limit_exceeded")

	// An existing owner accepting another invitation joins nobody new: not blocked by the limit.
	again := invite(t, env, op, org.ID, "first@acme.example")
	if rep := send(t, env, acceptReq(outboxSecret(t, env, org.ID, again.ID), "First")); rep.Status != http.StatusCreated {
		t.Errorf("an owner re-accepting at the limit: %d %s", rep.Status, rep.Body)
	}
	if n := countRows(t, env, `SELECT count(*) FROM memberships WHERE organization_id = $1`, org.ID); n != 2 {
		t.Errorf("%d memberships, want 2", n)
	}
}

// TestPolicyWithdrawIdentityProviders: withdrawing the organization_identity_providers
// entitlement succeeds (its reduction hook runs in the same transaction) and is audited.
func TestPolicyWithdrawIdentityProviders(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	opID, op := scopedToken(t, env, "organizations:write", "policies:write")
	org := createOrg(t, env, op, "acme", "Acme")
	rep := putPolicy(t, env, op, org.ID, `"1"`, map[string]any{"entitlements": map[string]any{"organization_identity_providers": false}})
	e := expectOneAudit(t, env, rep, "putPolicy", "succeeded", opID, org.ID, "")
	if !slices.Equal(e.ChangedFields, []string{"entitlements.organization_identity_providers"}) {
		t.Errorf("audit changed_fields = %v", e.ChangedFields)
	}
	expectEffective(t, getEffective(t, env, op, org.ID), map[string]sourced{
		"entitlements.organization_identity_providers": {false, "organization"},
	})
	// Granting it back is a change too.
	rep = putPolicy(t, env, op, org.ID, `"2"`, map[string]any{})
	if e := expectOneAudit(t, env, rep, "putPolicy", "succeeded", opID, org.ID, ""); !slices.Equal(e.ChangedFields,
		[]string{"entitlements.organization_identity_providers"}) {
		t.Errorf("audit changed_fields of the re-grant = %v", e.ChangedFields)
	}
}

// TestSettingsUnderLock: the owners' settings show the value that applies (a locked setting's
// locked value, from the deployment's defaults or the organization's policy), so a document
// read with GET can be written back with another field changed; a write that leaves a locked
// setting out or keeps its locked value is stored, one that changes it is 409 setting_locked.
// What the owners wrote for a setting applies again once its lock is lifted.
func TestSettingsUnderLock(t *testing.T) {
	t.Parallel()
	defaults, err := domain.ParsePolicyDefaults(`{"locked_settings": {"require_mfa": true}}`)
	if err != nil {
		t.Fatal(err)
	}
	env := servertest.Start(t, func(c *server.Config) { c.PolicyDefaults = defaults })
	_, op := scopedToken(t, env, "organizations:write", "policies:write")
	org := createOrg(t, env, op, "acme", "Acme")
	owner := addOwner(t, env, op, org.ID, "olivia@acme.example", "Olivia")
	putPolicy(t, env, op, org.ID, `"1"`, map[string]any{"locked_settings": map[string]any{
		"session_max_age_hours": 12, "allowed_email_domains": []string{"b.example", "a.example"}}})

	s, etag := getSettings(t, env, owner.APIKey)
	if !s.RequireMFA || s.SessionMaxAgeHours != 12 || !slices.Equal(s.AllowedEmailDomains, []string{"a.example", "b.example"}) ||
		s.RequireSSO || etag != `"1"` {
		t.Fatalf("settings under locks = %+v, want the locked values (require_mfa true, 12 h, a.example and b.example)", s)
	}
	if s.Locked["require_mfa"] != true || s.Locked["session_max_age_hours"] != float64(12) || len(s.Locked) != 3 {
		t.Errorf("locked = %v", s.Locked)
	}

	// The body read is written back with an unlocked field changed.
	rep := send(t, env, req{Method: http.MethodGet, Path: settingsPath, Token: owner.APIKey})
	var doc map[string]any
	rep.decode(t, &doc)
	doc["require_sso"] = true
	rep = send(t, env, settingsReq(owner.APIKey, `"1"`, doc))
	if rep.Status != http.StatusOK {
		t.Fatalf("writing back the settings read with require_sso changed: %d %s", rep.Status, rep.Body)
	}
	var put settingsJSON
	rep.decode(t, &put)
	if !put.RequireSSO || !put.RequireMFA || put.SessionMaxAgeHours != 12 || put.Version != 2 {
		t.Errorf("PUT answer = %+v", put)
	}
	if acts := findActivity(listActivity(t, env, owner.APIKey), "putSettings"); len(acts) != 1 ||
		!slices.Equal(acts[0].ChangedFields, []string{"require_sso", "require_mfa", "session_max_age_hours", "allowed_email_domains"}) {
		t.Errorf("putSettings Activity = %+v, want every field the owners' document changed", acts)
	}

	// Locked settings left out: stored, and still shown at their locked values.
	rep = send(t, env, settingsReq(owner.APIKey, `"2"`, map[string]any{"require_sso": true}))
	if rep.Status != http.StatusOK {
		t.Fatalf("PUT leaving the locked settings out: %d %s", rep.Status, rep.Body)
	}
	if s, _ := getSettings(t, env, owner.APIKey); !s.RequireSSO || !s.RequireMFA || s.SessionMaxAgeHours != 12 || s.Version != 3 ||
		len(s.AllowedEmailDomains) != 2 {
		t.Errorf("settings after a PUT leaving locked settings out = %+v", s)
	}

	// Another value for a locked setting is refused, whichever lock it is under.
	for name, value := range map[string]any{"require_mfa": false, "session_max_age_hours": 8, "allowed_email_domains": []string{"a.example"}} {
		pb := send(t, env, settingsReq(owner.APIKey, `"3"`, map[string]any{name: value})).
			expectProblem(t, http.StatusConflict, "setting_locked")
		if len(pb.Errors) != 1 || pb.Errors[0].Field != name {
			t.Errorf("setting_locked errors for %s = %+v", name, pb.Errors)
		}
	}
	if s, _ := getSettings(t, env, owner.APIKey); s.Version != 3 {
		t.Errorf("a refused PUT changed the settings: %+v", s)
	}

	// The organization's locks lifted: the owners' own values (left out, so the defaults)
	// apply; the deployment's lock stays.
	putPolicy(t, env, op, org.ID, `"2"`, map[string]any{})
	if s, _ := getSettings(t, env, owner.APIKey); s.SessionMaxAgeHours != 24 || len(s.AllowedEmailDomains) != 0 || !s.RequireMFA ||
		!s.RequireSSO || len(s.Locked) != 1 {
		t.Errorf("settings after the policy's locks are lifted = %+v", s)
	}
	expectEffective(t, getEffective(t, env, op, org.ID), map[string]sourced{
		"settings.require_sso":           {true, "owner"},
		"settings.require_mfa":           {true, "deployment"},
		"settings.session_max_age_hours": {24, "owner"},
		"settings.allowed_email_domains": {[]string{}, "owner"},
	})
}

// TestOwnersSettingsReadBack: what the owners write, with no lock on it, is what they read:
// their allowed email domains (sorted, once each) included, and an empty list as [].
//
// Fails when: reading the stored settings replaces the owners' domains (the mutant
// settings.go `AllowedEmailDomains == nil` made `!=` lived: every other test wrote domains
// only under a lock, whose value is what a read shows).
func TestOwnersSettingsReadBack(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, op := scopedToken(t, env, "organizations:write")
	org := createOrg(t, env, op, "readback", "Read back")
	owner := addOwner(t, env, op, org.ID, "olivia@readback.example", "Olivia")
	send(t, env, settingsReq(owner.APIKey, `"1"`, map[string]any{"require_sso": true, "session_max_age_hours": 8,
		"allowed_email_domains": []string{"b.example", "a.example", "b.example"}})).expectProblemOrOK(t, http.StatusOK)
	s, etag := getSettings(t, env, owner.APIKey)
	if !s.RequireSSO || s.SessionMaxAgeHours != 8 || !slices.Equal(s.AllowedEmailDomains, []string{"a.example", "b.example"}) || etag != `"2"` {
		t.Fatalf("settings read back = %+v (ETag %s), want require_sso, 8 h, a.example and b.example", s, etag)
	}
	send(t, env, settingsReq(owner.APIKey, `"2"`, map[string]any{"allowed_email_domains": []string{}})).expectProblemOrOK(t, http.StatusOK)
	rep := send(t, env, req{Method: http.MethodGet, Path: settingsPath, Token: owner.APIKey})
	if rep.Status != http.StatusOK || !strings.Contains(string(rep.Body), `"allowed_email_domains":[]`) {
		t.Errorf("an empty list read back: %d %s", rep.Status, rep.Body)
	}
}

// TestPolicyIntegersWrittenOtherwise: an integer written with an exponent or a zero fraction
// (1e2, 30.0, as some JSON encoders write numbers) is the integer the validator takes it for, not
// a body that "could not be read"; a fraction is refused by the validator, naming the field.
//
// Fails when: the handler decodes the body's text into its integer fields again (encoding/json
// refuses 1e2 for an int64) instead of binding the validated value with its integers written
// plainly (pipeline.integerText).
func TestPolicyIntegersWrittenOtherwise(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, op := scopedToken(t, env, "organizations:write", "policies:write")
	org := createOrg(t, env, op, "acme", "Acme")

	putPolicy(t, env, op, org.ID, `"1"`, json.RawMessage(`{"limits":{"max_agents":1e2,"max_users":30.0,"max_jobs_per_day":25000e-1}}`))
	p, _ := getPolicy(t, env, op, org.ID)
	if want := map[string]int64{"max_agents": 100, "max_users": 30, "max_jobs_per_day": 2500}; !maps.Equal(p.Limits, want) {
		t.Errorf("limits = %v, want %v", p.Limits, want)
	}
	rep := send(t, env, putPolicyReq(op, org.ID, `"2"`, json.RawMessage(`{"limits":{"max_agents":1.5}}`)))
	rep.expectProblem(t, http.StatusBadRequest, "invalid_request")
	if !strings.Contains(string(rep.Body), "limits.max_agents") {
		t.Errorf("the refusal does not name the field: %s", rep.Body)
	}
}
