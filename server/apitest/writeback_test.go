package apitest

import (
	"net/http"
	"strings"
	"testing"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/pipeline"
	"renga.dev/renga/server/servertest"
)

// TestWriteBackEveryPut: for every PUT of the spec, the body a GET of the same path returns,
// with one field changed, is accepted (a generated client's natural read-modify-write), and
// the change is stored. A PUT added to the spec without a case here fails the test.
func TestWriteBackEveryPut(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	operator := env.Token(t, servertest.AllScopes()...)
	org := createOrg(t, env, operator, newSlug(), "Write-back")
	_, owner := agentOwner(t, env)
	provider, _ := createProvider(t, env, operator, newProviderBody("writeback", "s3cret-writeback"))
	env.Track("s3cret-writeback")

	cases := map[string]struct {
		path   string
		token  string
		change func(map[string]any)
		check  func(map[string]any) bool
	}{
		"putPolicy": {policyPath(org.ID), operator,
			func(b map[string]any) { b["limits"] = map[string]any{"max_agents": 7} },
			func(b map[string]any) bool {
				limits, ok := b["limits"].(map[string]any)
				return ok && limits["max_agents"] == float64(7)
			}},
		"putSettings": {"/api/v1/org/settings", owner,
			func(b map[string]any) { b["session_max_age_hours"] = 12 },
			func(b map[string]any) bool { return b["session_max_age_hours"] == float64(12) }},
		"putSupportSource": {supportSourcePath, operator,
			func(b map[string]any) {
				b["enabled"], b["provider_id"], b["allowed_email_domain"] = true, provider.ID, "ops.example"
			},
			func(b map[string]any) bool { return b["enabled"] == true && b["allowed_email_domain"] == "ops.example" }},
		"putIdentityProvider": {providersPath + "/" + provider.ID, operator,
			func(b map[string]any) { b["display_name"] = "Written back" },
			func(b map[string]any) bool { return b["display_name"] == "Written back" }},
	}

	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	ops, err := pipeline.Operations(spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if op.Method != http.MethodPut {
			continue
		}
		c, ok := cases[op.ID]
		if !ok {
			t.Errorf("%s (PUT %s) has no write-back case here", op.ID, op.Route)
			continue
		}
		t.Run(op.ID, func(t *testing.T) {
			got := send(t, env, req{Method: http.MethodGet, Path: c.path, Token: c.token})
			if got.Status != http.StatusOK {
				t.Fatalf("GET: %d %s", got.Status, got.Body)
			}
			var body map[string]any
			got.decode(t, &body)
			c.change(body)
			put := send(t, env, req{Method: http.MethodPut, Path: c.path, Token: c.token, Body: jsonBody(body),
				Header: headers("If-Match", got.Header.Get("ETag"))})
			if put.Status != http.StatusOK {
				t.Fatalf("PUT of the GET body with one field changed: %d %s", put.Status, put.Body)
			}
			var after map[string]any
			send(t, env, req{Method: http.MethodGet, Path: c.path, Token: c.token}).decode(t, &after)
			if !c.check(after) {
				t.Errorf("the change is not stored: %s", jsonBody(after))
			}
		})
	}

	// What names the document must match: another organization's ID is refused.
	var p map[string]any
	got := send(t, env, req{Method: http.MethodGet, Path: policyPath(org.ID), Token: operator})
	got.decode(t, &p)
	p["organization_id"] = "org_" + strings.Repeat("1", 26)
	rep := send(t, env, req{Method: http.MethodPut, Path: policyPath(org.ID), Token: operator, Body: jsonBody(p),
		Header: headers("If-Match", got.Header.Get("ETag"))})
	if rep.Status != http.StatusBadRequest || !strings.Contains(string(rep.Body), "organization_id") {
		t.Errorf("PUT naming another organization: %d %s", rep.Status, rep.Body)
	}
}
