package apitest

import (
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/servertest"
)

// readablePattern is openapi.yaml's one pattern for names people read: it refuses C0 and C1
// controls and DEL, bidirectional controls and marks, zero-width and other invisible format
// characters, Hangul fillers, the byte-order mark and the line and paragraph separators.
const readablePattern = `^[^\x00-\x1F\x7F-\x9F\u00AD\u034F\u061C\u115F\u1160\u180E\u200B-\u200F\u2028-\u202E\u2060-\u206F\u3164\uFEFF\uFFA0\uFFF9-\uFFFB]+$`

// hostileChars are characters of each class names refuse.
var hostileChars = []struct{ class, char string }{
	{"bidi override U+202E", "\u202e"},
	{"bidi embedding U+202A", "\u202a"},
	{"bidi isolate U+2066", "\u2066"},
	{"bidi pop isolate U+2069", "\u2069"},
	{"bidi mark U+200F", "\u200f"},
	{"Arabic letter mark U+061C", "\u061c"},
	{"C1 next line U+0085", "\u0085"},
	{"C1 CSI U+009B", "\u009b"},
	{"zero-width space U+200B", "\u200b"},
	{"zero-width joiner U+200D", "\u200d"},
	{"word joiner U+2060", "\u2060"},
	{"byte-order mark U+FEFF", "\ufeff"},
}

// ordinaryTexts are non-ASCII texts names keep taking: accents, CJK, an emoji.
var ordinaryTexts = []string{"Café Zürich", "東京 本社", "Launch 🚀"}

// textField is a field of a request body that holds a name people read.
type textField struct {
	op    string // "METHOD /path", as openapi.yaml spells the path
	field string // the property, as the problem's errors name it
	ascii bool   // ASCII only (a slug): non-ASCII text is refused too
	// value is a valid value of the field holding text (made to fit an email or a URL).
	value func(text string) string
	// send sends the operation with the field set to v and every other part of it valid.
	send func(t *testing.T, v string) reply
	ok   int // the status of an accepted request
}

// TestNamesRefuseHiddenCharacters: every field of a name people read refuses each class of
// invisible or direction-changing character with the validation problem every pattern failure
// gets (400 invalid_request naming the field), and still takes accents, CJK and emoji.
func TestNamesRefuseHiddenCharacters(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, op := scopedToken(t, env, servertest.AllScopes()...)
	org := createOrg(t, env, op, newSlug(), "Hostile text")
	s := newAgentSetup(t, env)
	base, _ := createProvider(t, env, op, newProviderBody(newSlug(), ""))

	for _, f := range textFields(env, op, org.ID, s, base.ID) {
		t.Run(f.op+" "+f.field, func(t *testing.T) {
			for _, h := range hostileChars {
				v := f.value("a" + h.char + "b")
				p := f.send(t, v).expectProblem(t, http.StatusBadRequest, "invalid_request")
				named := false
				for _, e := range p.Errors {
					named = named || e.Field == f.field
				}
				if !named {
					t.Errorf("%s (%q): errors %+v do not name %s", h.class, v, p.Errors, f.field)
				}
			}
			if f.ascii {
				return
			}
			for _, text := range ordinaryTexts {
				if rep := f.send(t, f.value(text)); rep.Status != f.ok {
					t.Errorf("%q: %d, want %d: %s", f.value(text), rep.Status, f.ok, rep.Body)
				}
			}
		})
	}
}

// textFields are the fields of names people read, each with a request that sets it.
func textFields(env *servertest.Env, op, orgID string, s agentSetup, providerID string) []textField {
	plain := func(text string) string { return text }
	email := func(text string) string { return strings.ReplaceAll(text, " ", "") + "-" + random(3) + "@example.com" }
	slug := func(text string) string { return "ab" + text + "c" }
	issuer := func(text string) string { return "https://login.example.com/" + strings.ReplaceAll(text, " ", "-") }
	createOrgWith := func(field string) func(*testing.T, string) reply {
		return func(t *testing.T, v string) reply {
			body := map[string]string{"slug": newSlug(), "display_name": "Name"}
			body[field] = v
			return send(t, env, req{Method: http.MethodPost, Path: orgsPath, Token: op, Body: jsonBody(body), Header: headers("Idempotency-Key", newKey())})
		}
	}
	registerWith := func(field string) func(*testing.T, string) reply {
		return func(t *testing.T, v string) reply {
			a := newSpecAgent(env)
			body := map[string]string{"installation_id": a.ID, "public_key": a.publicKeyB64(), "hostname": "host", "os": "linux"}
			body[field] = v
			return send(t, env, req{Method: http.MethodPost, Path: installationsURL, Token: s.Key, Body: jsonBody(body)})
		}
	}
	createProviderAt := func(path, token string) func(field string) func(*testing.T, string) reply {
		return func(field string) func(*testing.T, string) reply {
			return func(t *testing.T, v string) reply {
				body := newProviderBody(newSlug(), "")
				delete(body, "allowed_email_domains")
				body[field] = v
				return send(t, env, req{Method: http.MethodPost, Path: path, Token: token, Body: jsonBody(body), Header: headers("Idempotency-Key", newKey())})
			}
		}
	}
	createProviderWith := createProviderAt(providersPath, op)
	createOrgProviderWith := createProviderAt(orgProvidersPath, s.Owner)
	// A provider's PUT: an issuer must equal the stored one, so an issuer the create takes is
	// written back to a provider made with it.
	putProviderWith := func(field string) func(*testing.T, string) reply {
		return func(t *testing.T, v string) reply {
			id := providerID
			if field == "issuer" {
				if rep := createProviderWith("issuer")(t, v); rep.Status == http.StatusCreated {
					var p identityProvider
					rep.decode(t, &p)
					id = p.ID
				}
			}
			_, got := getProvider(t, env, op, id)
			body := map[string]any{"display_name": "Provider", "client_id": "renga"}
			body[field] = v
			return send(t, env, req{Method: http.MethodPut, Path: providersPath + "/" + id, Token: op, Body: jsonBody(body),
				Header: headers("If-Match", got.Header.Get("ETag"))})
		}
	}

	return []textField{
		{op: "POST /api/v1/operator/organizations", field: "display_name", value: plain, send: createOrgWith("display_name"), ok: http.StatusCreated},
		{op: "POST /api/v1/operator/organizations", field: "slug", ascii: true, value: slug, send: createOrgWith("slug")},
		{op: "PATCH /api/v1/operator/organizations/{organization_id}", field: "display_name", value: plain, ok: http.StatusOK,
			send: func(t *testing.T, v string) reply {
				_, etag := getOrg(t, env, op, orgID)
				return send(t, env, patchReq(op, orgID, etag, v))
			}},
		{op: "POST /api/v1/operator/organizations/{organization_id}/invitations", field: "email", value: email, ok: http.StatusCreated,
			send: func(t *testing.T, v string) reply { return send(t, env, inviteReq(op, orgID, v, newKey())) }},
		{op: "POST /api/v1/invitations/accept", field: "display_name", value: plain, ok: http.StatusCreated,
			send: func(t *testing.T, v string) reply {
				inv := invite(t, env, op, orgID, newSlug()+"@example.com")
				rep := send(t, env, acceptReq(outboxSecret(t, env, orgID, inv.ID), v))
				if rep.Status == http.StatusCreated {
					var a acceptedJSON
					rep.decode(t, &a)
					env.Track(a.APIKey)
				}
				return rep
			}},
		{op: "POST /api/v1/org/intake-keys", field: "name", value: plain, ok: http.StatusCreated,
			send: func(t *testing.T, v string) reply {
				rep := send(t, env, req{Method: http.MethodPost, Path: intakeKeysPath, Token: s.Owner, Body: jsonBody(map[string]string{"name": v}),
					Header: headers("Idempotency-Key", newKey())})
				if rep.Status == http.StatusCreated {
					var k intakeKeyJSON
					rep.decode(t, &k)
					trackKey(env, k.Key)
				}
				return rep
			}},
		{op: "POST /api/v1/agent/installations", field: "hostname", value: plain, send: registerWith("hostname"), ok: http.StatusCreated},
		{op: "POST /api/v1/agent/installations", field: "os", value: plain, send: registerWith("os"), ok: http.StatusCreated},
		{op: "POST /api/v1/org/jobs", field: "command", value: plain, ok: http.StatusCreated,
			send: func(t *testing.T, v string) reply { return send(t, env, createJobReq(s.Owner, s.Agent.ID, v)) }},
		{op: "POST /api/v1/org/support-grants", field: "support_email", value: email, ok: http.StatusCreated,
			send: func(t *testing.T, v string) reply {
				body := map[string]any{"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "support_email": v}
				return send(t, env, req{Method: http.MethodPost, Path: supportGrantsPath, Token: s.Owner, Body: jsonBody(body), Header: headers("Idempotency-Key", newKey())})
			}},
		{op: "PUT /api/v1/operator/support/source", field: "allowed_emails.0", value: email, ok: http.StatusOK,
			send: func(t *testing.T, v string) reply {
				got := send(t, env, req{Method: http.MethodGet, Path: supportSourcePath, Token: op})
				return send(t, env, req{Method: http.MethodPut, Path: supportSourcePath, Token: op,
					Body: jsonBody(map[string]any{"enabled": false, "allowed_emails": []string{v}}), Header: headers("If-Match", got.Header.Get("ETag"))})
			}},
		{op: "POST /api/v1/operator/identity-providers", field: "display_name", value: plain, send: createProviderWith("display_name"), ok: http.StatusCreated},
		{op: "POST /api/v1/operator/identity-providers", field: "client_id", value: plain, send: createProviderWith("client_id"), ok: http.StatusCreated},
		{op: "POST /api/v1/operator/identity-providers", field: "issuer", value: issuer, send: createProviderWith("issuer"), ok: http.StatusCreated},
		{op: "POST /api/v1/operator/identity-providers", field: "slug", ascii: true, value: slug, send: createProviderWith("slug")},
		{op: "PUT /api/v1/operator/identity-providers/{provider_id}", field: "display_name", value: plain, send: putProviderWith("display_name"), ok: http.StatusOK},
		{op: "PUT /api/v1/operator/identity-providers/{provider_id}", field: "client_id", value: plain, send: putProviderWith("client_id"), ok: http.StatusOK},
		{op: "PUT /api/v1/operator/identity-providers/{provider_id}", field: "issuer", value: issuer, send: putProviderWith("issuer"), ok: http.StatusOK},
		{op: "POST /api/v1/org/identity-providers", field: "display_name", value: plain, send: createOrgProviderWith("display_name"), ok: http.StatusCreated},
		{op: "POST /api/v1/org/identity-providers", field: "client_id", value: plain, send: createOrgProviderWith("client_id"), ok: http.StatusCreated},
		{op: "POST /api/v1/org/identity-providers", field: "issuer", value: issuer, send: createOrgProviderWith("issuer"), ok: http.StatusCreated},
		{op: "POST /api/v1/org/identity-providers", field: "slug", ascii: true, value: slug, send: createOrgProviderWith("slug")},
	}
}

// TestNamePatternIsOneAndTheSame: every name pattern of openapi.yaml (one that refuses control
// characters) is spelled as the one pattern, and every request field that carries it is in
// TestNamesRefuseHiddenCharacters's table, so a new name field cannot go untested.
func TestNamePatternIsOneAndTheSame(t *testing.T) {
	t.Parallel()
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	var carried []string
	var visit func(where, field string, ref *openapi3.SchemaRef, depth int)
	visit = func(where, field string, ref *openapi3.SchemaRef, depth int) {
		if ref == nil || ref.Value == nil || depth > 8 {
			return
		}
		s := ref.Value
		if strings.HasPrefix(s.Pattern, `^[^\x00`) && s.Pattern != readablePattern {
			t.Errorf("%s %s: pattern %s is not the one pattern for names", where, field, s.Pattern)
		}
		if s.Pattern == readablePattern && where != "" {
			carried = append(carried, where+" "+field)
		}
		for name, p := range s.Properties {
			f := name
			if field != "" {
				f = field + "." + name
			}
			visit(where, f, p, depth+1)
		}
		if s.Items != nil {
			visit(where, field+".0", s.Items, depth+1)
		}
		for _, sub := range s.AllOf {
			visit(where, field, sub, depth+1)
		}
	}
	for _, name := range componentNames(spec) {
		visit("", name, spec.Components.Schemas[name], 0)
	}
	for path, item := range spec.Paths.Map() {
		for method, o := range item.Operations() {
			if o.RequestBody == nil || o.RequestBody.Value == nil {
				continue
			}
			for _, mt := range o.RequestBody.Value.Content {
				visit(method+" "+path, "", mt.Schema, 0)
			}
		}
	}
	var tested []string
	for _, f := range textFields(nil, "", "", agentSetup{}, "") {
		if !f.ascii {
			tested = append(tested, f.op+" "+f.field)
		}
	}
	slices.Sort(carried)
	carried = slices.Compact(carried)
	slices.Sort(tested)
	if !slices.Equal(carried, tested) {
		t.Errorf("request fields with the name pattern:\n%s\nfields the test sends:\n%s", strings.Join(carried, "\n"), strings.Join(tested, "\n"))
	}
}

func componentNames(spec *openapi3.T) []string {
	var names []string
	for name := range spec.Components.Schemas {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// TestNamePatternMeansTheSameInECMA262: the pattern refuses the same characters, all of Unicode
// through, under kin-openapi (as the server validates) and in ECMA-262 (OpenAPI's dialect, as
// generated clients and the spec's linters read it), with and without the u flag. Needs node
// (make lint-spec's); skipped without it.
func TestNamePatternMeansTheSameInECMA262(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node on PATH")
	}
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	name := spec.Components.Schemas["DisplayName"].Value
	if name.Pattern != readablePattern {
		t.Fatalf("DisplayName's pattern %s", name.Pattern)
	}
	var refused []string
	for r := rune(0); r <= 0x10FFFF; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		if name.VisitJSON("a"+string(r)+"b") != nil {
			refused = append(refused, strconv.Itoa(int(r)))
		}
	}
	script := `const p = process.argv[1], out = [];
for (const flags of ["", "u"]) {
  const re = new RegExp(p, flags), refused = [];
  for (let r = 0; r <= 0x10FFFF; r++) {
    if (r >= 0xD800 && r <= 0xDFFF) continue;
    if (!re.test("a" + String.fromCodePoint(r) + "b")) refused.push(String(r));
  }
  out.push(refused.join(" "));
}
console.log(out.join("\n"));`
	got, err := exec.Command(node, "-e", script, readablePattern).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	want := strings.Join(refused, " ")
	for i, line := range strings.Split(strings.TrimSpace(string(got)), "\n") {
		if line != want {
			t.Errorf("ECMA-262 (flags %q) refuses %s; kin-openapi refuses %s", []string{"", "u"}[i], line, want)
		}
	}
	if len(refused) == 0 || !slices.Contains(refused, "8238") || slices.Contains(refused, "233") {
		t.Errorf("refused code points %v: want U+202E (8238) and not U+00E9 (233)", refused)
	}
}
