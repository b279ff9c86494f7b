package shortpath_test

import (
	"context"
	"maps"
	"math/big"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"renga.dev/renga/provider/internal/acctest"
	"renga.dev/renga/provider/internal/provider"
	"renga.dev/renga/provider/internal/shortpath"
)

// validation is the framework's server and provider.Server, configured alike (or both not
// configured), and the two resource types' protocol schemas.
type validation struct {
	name               string
	framework, wrapped tfprotov6.ProviderServer
	org, pol           resourceSchema
}

func newValidation(t testing.TB, name string, framework, wrapped tfprotov6.ProviderServer) *validation {
	t.Helper()
	schemas, err := framework.GetProviderSchema(context.Background(), &tfprotov6.GetProviderSchemaRequest{})
	if err != nil || len(schemas.Diagnostics) > 0 {
		t.Fatal(err, schemas.Diagnostics)
	}
	v := &validation{name: name, framework: framework, wrapped: wrapped}
	for _, r := range []struct {
		name string
		to   *resourceSchema
	}{{"renga_organization", &v.org}, {"renga_organization_policy", &v.pol}} {
		s := schemas.ResourceSchemas[r.name]
		if s == nil {
			t.Fatalf("no schema for %s", r.name)
		}
		typ, ok := s.ValueType().(tftypes.Object)
		if !ok {
			t.Fatalf("%s: not an object", r.name)
		}
		*r.to = resourceSchema{name: r.name, schema: s, typ: typ}
	}
	return v
}

// validate asks both servers to validate config, compares their answers, and says whether the
// framework's was empty and whether the shorter path answered.
func (v *validation) validate(t testing.TB, what string, r resourceSchema, config tftypes.Value, caps *tfprotov6.ValidateResourceConfigClientCapabilities) (empty, answered bool) {
	t.Helper()
	ctx := context.Background()
	dv, err := tfprotov6.NewDynamicValue(r.typ, config)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	req := func() *tfprotov6.ValidateResourceConfigRequest {
		c := dv
		return &tfprotov6.ValidateResourceConfigRequest{TypeName: r.name, Config: &c, ClientCapabilities: caps}
	}
	fr, err := v.framework.ValidateResourceConfig(ctx, req())
	if err != nil {
		t.Fatal(err)
	}
	before := shortpath.AnsweredCalls(v.wrapped, "ValidateResourceConfig")
	wr, err := v.wrapped.ValidateResourceConfig(ctx, req())
	if err != nil {
		t.Fatal(err)
	}
	answered = shortpath.AnsweredCalls(v.wrapped, "ValidateResourceConfig") > before
	// The framework visits a schema's attributes in Go's map order, different from call to
	// call: two of its answers with diagnostics about several attributes list them in
	// different orders. Both answers are put in one order before they are compared.
	canonical(fr)
	canonical(wr)
	if !reflect.DeepEqual(fr, wr) {
		t.Errorf("%s: %s %s:\nframework: %s\nwrapped:   %s", v.name, r.name, what, describe(fr), describe(wr))
	}
	empty = reflect.DeepEqual(fr, &tfprotov6.ValidateResourceConfigResponse{})
	if empty != answered {
		t.Errorf("%s: %s %s: the framework's answer is empty: %v; the shorter path answered: %v (%s)", v.name, r.name, what, empty, answered, describe(fr))
	}
	return empty, answered
}

func canonical(resp *tfprotov6.ValidateResourceConfigResponse) {
	key := func(d *tfprotov6.Diagnostic) string {
		return d.Attribute.String() + "\x00" + string(d.Severity) + "\x00" + d.Summary + "\x00" + d.Detail
	}
	slices.SortStableFunc(resp.Diagnostics, func(a, b *tfprotov6.Diagnostic) int { return strings.Compare(key(a), key(b)) })
}

// validationCase is a configuration and whether the framework says nothing about it.
type validationCase struct {
	what   string
	r      resourceSchema
	config tftypes.Value
	valid  bool
}

var (
	unknownString = tftypes.NewValue(tftypes.String, tftypes.UnknownValue)
	unknownNumber = tftypes.NewValue(tftypes.Number, tftypes.UnknownValue)
	unknownBool   = tftypes.NewValue(tftypes.Bool, tftypes.UnknownValue)
	stringSet     = tftypes.Set{ElementType: tftypes.String}
)

func str(s string) tftypes.Value   { return tftypes.NewValue(tftypes.String, s) }
func num(n int64) tftypes.Value    { return tftypes.NewValue(tftypes.Number, n) }
func boolean(b bool) tftypes.Value { return tftypes.NewValue(tftypes.Bool, b) }
func set(vs ...tftypes.Value) tftypes.Value {
	if vs == nil {
		vs = []tftypes.Value{}
	}
	return tftypes.NewValue(stringSet, vs)
}
func strs(ss ...string) tftypes.Value {
	vs := []tftypes.Value{}
	for _, s := range ss {
		vs = append(vs, str(s))
	}
	return set(vs...)
}

// domains is n distinct valid email domains.
func domains(n int) tftypes.Value {
	var ss []string
	for i := range n {
		ss = append(ss, "d"+strings.Repeat("x", i%5)+string(rune('a'+i%26))+string(rune('a'+i/26))+".example")
	}
	return strs(ss...)
}

const orgID = "org_01m8sm1vwervnh62a9mvsp28nt"

func (v *validation) cases(t *testing.T) []validationCase {
	org, pol := v.org, v.pol
	o := func(attrs map[string]tftypes.Value) tftypes.Value { return object(t, org.typ, attrs) }
	limits, locked, ent := pol.attrType(t, "limits"), pol.attrType(t, "locked_settings"), pol.attrType(t, "entitlements")
	sec := func(typ tftypes.Object, attrs map[string]tftypes.Value) tftypes.Value { return object(t, typ, attrs) }
	p := func(attrs map[string]tftypes.Value) tftypes.Value {
		if _, ok := attrs["organization_id"]; !ok {
			attrs["organization_id"] = str(orgID)
		}
		return object(t, pol.typ, attrs)
	}
	big := func(s string) tftypes.Value {
		f, _, err := big.ParseFloat(s, 10, 512, big.ToNearestEven)
		if err != nil {
			t.Fatal(err)
		}
		return tftypes.NewValue(tftypes.Number, f)
	}
	return []validationCase{
		// renga_organization, valid.
		{"slug and display name", org, o(map[string]tftypes.Value{"slug": str("acme-corp"), "display_name": str("Acme Corp")}), true},
		{"slug unknown", org, o(map[string]tftypes.Value{"slug": unknownString, "display_name": str("Acme")}), true},
		{"display name unknown", org, o(map[string]tftypes.Value{"slug": str("acme"), "display_name": unknownString}), true},
		{"all unknown", org, o(map[string]tftypes.Value{"slug": unknownString, "display_name": unknownString}), true},
		{"longest slug, 200 characters of name", org, o(map[string]tftypes.Value{"slug": str("a" + strings.Repeat("-", 38) + "9"), "display_name": str(strings.Repeat("é", 200))}), true},
		{"shortest slug, one character of name", org, o(map[string]tftypes.Value{"slug": str("a1b"), "display_name": str("x")}), true},
		// renga_organization, invalid.
		{"slug missing", org, o(map[string]tftypes.Value{"display_name": str("Acme")}), false},
		{"both missing", org, o(nil), false},
		{"id configured", org, o(map[string]tftypes.Value{"slug": str("acme"), "display_name": str("Acme"), "id": str(orgID)}), false},
		{"id unknown", org, o(map[string]tftypes.Value{"slug": str("acme"), "display_name": str("Acme"), "id": unknownString}), false},
		{"state configured", org, o(map[string]tftypes.Value{"slug": str("acme"), "display_name": str("Acme"), "state": str("active")}), false},
		{"version configured", org, o(map[string]tftypes.Value{"slug": str("acme"), "display_name": str("Acme"), "version": num(1)}), false},
		{"version not an integer", org, o(map[string]tftypes.Value{"slug": str("acme"), "display_name": str("Acme"), "version": big("1.5")}), false},
		{"slug upper case", org, o(map[string]tftypes.Value{"slug": str("Acme"), "display_name": str("Acme")}), false},
		{"slug too short", org, o(map[string]tftypes.Value{"slug": str("ab"), "display_name": str("Acme")}), false},
		{"slug too long", org, o(map[string]tftypes.Value{"slug": str(strings.Repeat("a", 41)), "display_name": str("Acme")}), false},
		{"slug starts with a hyphen", org, o(map[string]tftypes.Value{"slug": str("-abc"), "display_name": str("Acme")}), false},
		{"slug empty", org, o(map[string]tftypes.Value{"slug": str(""), "display_name": str("Acme")}), false},
		{"display name empty", org, o(map[string]tftypes.Value{"slug": str("acme"), "display_name": str("")}), false},
		{"display name too long", org, o(map[string]tftypes.Value{"slug": str("acme"), "display_name": str(strings.Repeat("é", 201))}), false},
		{"display name with a control character", org, o(map[string]tftypes.Value{"slug": str("acme"), "display_name": str("a\tb")}), false},
		{"everything wrong at once", org, o(map[string]tftypes.Value{"slug": str("A_"), "display_name": str(""), "id": str("x"), "state": unknownString, "version": num(2)}), false},

		// renga_organization_policy, valid.
		{"organization only", pol, p(map[string]tftypes.Value{}), true},
		{"organization unknown", pol, p(map[string]tftypes.Value{"organization_id": unknownString}), true},
		{"overwrite_existing true", pol, p(map[string]tftypes.Value{"overwrite_existing": boolean(true)}), true},
		{"overwrite_existing unknown", pol, p(map[string]tftypes.Value{"overwrite_existing": unknownBool}), true},
		{"sections unknown", pol, p(map[string]tftypes.Value{
			"limits": tftypes.NewValue(limits, tftypes.UnknownValue), "locked_settings": tftypes.NewValue(locked, tftypes.UnknownValue), "entitlements": tftypes.NewValue(ent, tftypes.UnknownValue)}), true},
		{"sections empty", pol, p(map[string]tftypes.Value{"limits": sec(limits, nil), "locked_settings": sec(locked, nil), "entitlements": sec(ent, nil)}), true},
		{"everything set", pol, p(map[string]tftypes.Value{
			"limits": sec(limits, map[string]tftypes.Value{"max_agents": num(0), "max_users": num(1), "intake_bytes_per_day": num(1 << 40),
				"observation_retention_days": num(3650), "max_jobs_per_day": num(10000)}),
			"locked_settings": sec(locked, map[string]tftypes.Value{"require_sso": boolean(true), "require_mfa": boolean(false),
				"session_max_age_hours": num(720), "allowed_email_domains": strs("a.example", "b.example.org")}),
			"entitlements": sec(ent, map[string]tftypes.Value{"jobs": boolean(true), "organization_identity_providers": boolean(false), "owner_export": unknownBool}),
		}), true},
		{"limits at their minimums", pol, p(map[string]tftypes.Value{"limits": sec(limits, map[string]tftypes.Value{
			"max_agents": num(0), "max_users": num(1), "intake_bytes_per_day": num(0), "observation_retention_days": num(1), "max_jobs_per_day": num(0)})}), true},
		{"limits unknown inside", pol, p(map[string]tftypes.Value{"limits": sec(limits, map[string]tftypes.Value{"max_agents": unknownNumber, "max_users": num(5)})}), true},
		{"domains unknown", pol, p(map[string]tftypes.Value{"locked_settings": sec(locked, map[string]tftypes.Value{"allowed_email_domains": tftypes.NewValue(stringSet, tftypes.UnknownValue)})}), true},
		{"a domain unknown", pol, p(map[string]tftypes.Value{"locked_settings": sec(locked, map[string]tftypes.Value{"allowed_email_domains": set(str("a.example"), unknownString)})}), true},
		{"no domains", pol, p(map[string]tftypes.Value{"locked_settings": sec(locked, map[string]tftypes.Value{"allowed_email_domains": set()})}), true},
		{"100 domains", pol, p(map[string]tftypes.Value{"locked_settings": sec(locked, map[string]tftypes.Value{"allowed_email_domains": domains(100)})}), true},
		{"session hours unknown", pol, p(map[string]tftypes.Value{"locked_settings": sec(locked, map[string]tftypes.Value{"session_max_age_hours": unknownNumber, "require_mfa": unknownBool})}), true},
		// renga_organization_policy, invalid.
		{"organization missing", pol, p(map[string]tftypes.Value{"organization_id": tftypes.NewValue(tftypes.String, nil)}), false},
		{"organization ID malformed", pol, p(map[string]tftypes.Value{"organization_id": str("org_X")}), false},
		{"id configured", pol, p(map[string]tftypes.Value{"id": str(orgID)}), false},
		{"version unknown", pol, p(map[string]tftypes.Value{"version": unknownNumber}), false},
		{"max_users 0", pol, p(map[string]tftypes.Value{"limits": sec(limits, map[string]tftypes.Value{"max_users": num(0)})}), false},
		{"max_agents -1", pol, p(map[string]tftypes.Value{"limits": sec(limits, map[string]tftypes.Value{"max_agents": num(-1)})}), false},
		{"retention 3651 days", pol, p(map[string]tftypes.Value{"limits": sec(limits, map[string]tftypes.Value{"observation_retention_days": num(3651)})}), false},
		{"max_agents not an integer", pol, p(map[string]tftypes.Value{"limits": sec(limits, map[string]tftypes.Value{"max_agents": big("1.5")})}), false},
		{"max_agents beyond 64 bits", pol, p(map[string]tftypes.Value{"limits": sec(limits, map[string]tftypes.Value{"max_agents": big("1e30")})}), false},
		{"session 0 hours", pol, p(map[string]tftypes.Value{"locked_settings": sec(locked, map[string]tftypes.Value{"session_max_age_hours": num(0)})}), false},
		{"session 721 hours", pol, p(map[string]tftypes.Value{"locked_settings": sec(locked, map[string]tftypes.Value{"session_max_age_hours": num(721)})}), false},
		{"101 domains", pol, p(map[string]tftypes.Value{"locked_settings": sec(locked, map[string]tftypes.Value{"allowed_email_domains": domains(101)})}), false},
		{"a domain malformed", pol, p(map[string]tftypes.Value{"locked_settings": sec(locked, map[string]tftypes.Value{"allowed_email_domains": strs("a.example", "Not_A_Domain")})}), false},
		{"a domain empty", pol, p(map[string]tftypes.Value{"locked_settings": sec(locked, map[string]tftypes.Value{"allowed_email_domains": strs("")})}), false},
		{"a domain too long", pol, p(map[string]tftypes.Value{"locked_settings": sec(locked, map[string]tftypes.Value{"allowed_email_domains": strs(strings.Repeat("a", 250) + ".com")})}), false},
		{"a domain twice", pol, p(map[string]tftypes.Value{"locked_settings": sec(locked, map[string]tftypes.Value{"allowed_email_domains": set(str("a.example"), str("a.example"))})}), false},
		{"several wrong at once", pol, p(map[string]tftypes.Value{"organization_id": str("nope"), "version": num(1),
			"limits":          sec(limits, map[string]tftypes.Value{"max_users": num(0), "observation_retention_days": num(0)}),
			"locked_settings": sec(locked, map[string]tftypes.Value{"session_max_age_hours": num(0), "allowed_email_domains": strs("X", "")})}), false},
	}
}

// TestSameValidation: for renga_organization and renga_organization_policy, the provider's
// server (provider.Server) answers ValidateResourceConfig exactly as the framework's own
// server does, configured against a real server or not configured at all (as Terraform
// validates before it configures), with and without client capabilities: valid
// configurations (known, unknown and null values, sections present, absent, empty or
// unknown, sets with unknown elements, at their limits), which the shorter path answers, and
// invalid ones (each validator failing, several at once, computed attributes configured,
// values that are not 64-bit integers, a set with a duplicate), which go to the framework;
// then a few hundred generated configurations.
//
// Fails when: an answer differs, the shorter path answers where the framework says anything,
// or does not answer a valid configuration (validConfig would have stopped answering).
func TestSameValidation(t *testing.T) {
	env := acctest.Start(t)
	servers := []*validation{
		newValidation(t, "configured",
			configure(t, providerserver.NewProtocol6(provider.New("test")())(), env.URL, env.Token),
			configure(t, provider.Server("test")(), env.URL, env.Token)),
		newValidation(t, "not configured", providerserver.NewProtocol6(provider.New("test")())(), provider.Server("test")()),
	}
	for _, v := range servers {
		for _, caps := range []*tfprotov6.ValidateResourceConfigClientCapabilities{nil, {WriteOnlyAttributesAllowed: true}} {
			for _, c := range v.cases(t) {
				empty, _ := v.validate(t, c.what, c.r, c.config, caps)
				if empty != c.valid {
					t.Errorf("%s: %s %s: valid %v, the framework says otherwise", v.name, c.r.name, c.what, c.valid)
				}
			}
		}
		var answered, valid int
		rnd := rand.New(rand.NewPCG(1, 2))
		for i := range 300 {
			r := v.org
			if i%2 == 1 {
				r = v.pol
			}
			empty, ans := v.validate(t, "generated", r, generate(rnd, r.typ, ""), nil)
			if empty {
				valid++
			}
			if ans {
				answered++
			}
		}
		t.Logf("%s: %d of 300 generated configurations valid, %d answered by the shorter path", v.name, valid, answered)
		if valid < 60 || valid > 240 {
			t.Errorf("%s: %d of 300 generated configurations valid: the generator is off", v.name, valid)
		}
	}
	// A configuration Terraform does not send (none at all): the framework's.
	v := servers[0]
	for _, s := range []tfprotov6.ProviderServer{v.framework, v.wrapped} {
		resp, err := s.ValidateResourceConfig(context.Background(), &tfprotov6.ValidateResourceConfigRequest{TypeName: "renga_organization"})
		if err != nil || len(resp.Diagnostics) > 0 {
			t.Errorf("no configuration: %v %v", err, resp.Diagnostics)
		}
	}
}

// generate is a configuration of type typ, each value drawn from valid values most of the
// time, else from nulls, unknowns and values the framework or a validator refuses. name is the
// attribute's name (the values drawn depend on it).
func generate(rnd *rand.Rand, typ tftypes.Type, name string) tftypes.Value {
	pick := func(vs ...tftypes.Value) tftypes.Value { return vs[rnd.IntN(len(vs))] }
	odd := rnd.IntN(12) == 0 // rarely: something else
	switch typ := typ.(type) {
	case tftypes.Object:
		if name != "" {
			switch rnd.IntN(8) {
			case 0:
				return tftypes.NewValue(typ, nil)
			case 1:
				return tftypes.NewValue(typ, tftypes.UnknownValue)
			}
		}
		attrs := map[string]tftypes.Value{}
		for _, n := range slices.Sorted(maps.Keys(typ.AttributeTypes)) {
			attrs[n] = generate(rnd, typ.AttributeTypes[n], n)
		}
		return tftypes.NewValue(typ, attrs)
	case tftypes.Set:
		if odd {
			return pick(tftypes.NewValue(typ, tftypes.UnknownValue), strs("Bad"), set(str("a.example"), str("a.example")), strs(""), domains(101), set(unknownString, str("-x.example")))
		}
		return pick(tftypes.NewValue(typ, nil), set(), strs("a.example"), strs("a.example", "b.example"), set(unknownString, str("c.example")), domains(100))
	}
	switch name {
	case "id", "state", "version":
		switch {
		case !odd:
			return tftypes.NewValue(typ, nil)
		case typ.Is(tftypes.Number):
			return pick(num(1), unknownNumber)
		}
		return pick(str(orgID), unknownString)
	case "slug":
		if odd {
			return pick(tftypes.NewValue(typ, nil), str("A"), str("ab"), str("abc-"), str(strings.Repeat("a", 41)))
		}
		return pick(str("acme"), str("a1b"), unknownString, str(strings.Repeat("z", 40)))
	case "display_name":
		if odd {
			return pick(tftypes.NewValue(typ, nil), str(""), str("a\x00"), str(strings.Repeat("x", 201)))
		}
		return pick(str("Acme"), unknownString, str(strings.Repeat("é", 200)))
	case "organization_id":
		if odd {
			return pick(tftypes.NewValue(typ, nil), str("org_"), str(orgID+"x"))
		}
		return pick(str(orgID), unknownString)
	}
	switch {
	case typ.Is(tftypes.Bool):
		return pick(tftypes.NewValue(typ, nil), boolean(true), boolean(false), unknownBool)
	case typ.Is(tftypes.Number):
		if odd {
			f, _ := new(big.Float).SetString("2.5")
			return pick(num(-1), num(0), num(3651), num(721), tftypes.NewValue(typ, f))
		}
		return pick(tftypes.NewValue(typ, nil), unknownNumber, num(1), num(24), num(720))
	}
	return tftypes.NewValue(typ, nil)
}

// FuzzValidation: generated configurations (from the fuzzer's seeds), validated by both
// servers, not configured; the answers must be the same, and the shorter path must answer
// exactly when the framework says nothing. `go test` runs the seeds; `go test -fuzz
// Validation ./provider/internal/shortpath` searches further.
func FuzzValidation(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3, 42, 1000} {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	v := newValidation(f, "not configured", providerserver.NewProtocol6(provider.New("test")())(), provider.Server("test")())
	f.Fuzz(func(t *testing.T, seed uint64, policy bool) {
		r := v.org
		if policy {
			r = v.pol
		}
		v.validate(t, "generated", r, generate(rand.New(rand.NewPCG(seed, seed>>7)), r.typ, ""), nil)
	})
}
