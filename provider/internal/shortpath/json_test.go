package shortpath

import (
	"bytes"
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"renga.dev/renga/provider/internal/organization"
	"renga.dev/renga/provider/internal/organizationpolicy"
)

// jsonTypes are the types valueFromJSON is held to tftypes on: the two resources' schemas, and
// types they do not have (lists, maps, numbers in collections, dynamic, tuples).
func jsonTypes(t testing.TB) map[string]tftypes.Type {
	types := map[string]tftypes.Type{
		"other": tftypes.Object{AttributeTypes: map[string]tftypes.Type{
			"list":    tftypes.List{ElementType: tftypes.Number},
			"map":     tftypes.Map{ElementType: tftypes.Bool},
			"set":     tftypes.Set{ElementType: tftypes.Object{AttributeTypes: map[string]tftypes.Type{"n": tftypes.Number}}},
			"dynamic": tftypes.DynamicPseudoType,
			"dynlist": tftypes.List{ElementType: tftypes.DynamicPseudoType},
			"tuple":   tftypes.Tuple{ElementTypes: []tftypes.Type{tftypes.String, tftypes.Number}},
		}},
	}
	for _, f := range []func() resource.Resource{organization.NewResource, organizationpolicy.NewResource} {
		r := f()
		var md resource.MetadataResponse
		r.Metadata(context.Background(), resource.MetadataRequest{ProviderTypeName: "renga"}, &md)
		var resp resource.SchemaResponse
		r.Schema(context.Background(), resource.SchemaRequest{}, &resp)
		if resp.Diagnostics.HasError() {
			t.Fatal(resp.Diagnostics)
		}
		types[md.TypeName] = resp.Schema.Type().TerraformType(context.Background())
	}
	return types
}

// Stored states as Terraform writes them (valueFromJSON must read these itself), then
// everything else it must either read as tftypes does or leave to tftypes.
var (
	terraformJSON = []struct{ typ, json string }{
		{"renga_organization", `{"display_name":"Scale test 000","id":"org_01m8swrfwkhvafnnwj0n5yj5j4","slug":"scale-000","state":"active","version":1}`},
		{"renga_organization_policy", `{"entitlements":{"jobs":true,"organization_identity_providers":null,"owner_export":null},"id":"org_01m8swrfwkhvafnnwj0n5yj5j4","limits":{"intake_bytes_per_day":null,"max_agents":100,"max_jobs_per_day":null,"max_users":10,"observation_retention_days":null},"locked_settings":null,"organization_id":"org_01m8swrfwkhvafnnwj0n5yj5j4","overwrite_existing":false,"version":2}`},
		{"renga_organization_policy", `{"entitlements":null,"id":"org_x","limits":{"intake_bytes_per_day":10737418240,"max_agents":0,"max_jobs_per_day":null,"max_users":9223372036854775807,"observation_retention_days":-1},"locked_settings":{"allowed_email_domains":["b.example","a.example"],"require_mfa":true,"require_sso":false,"session_max_age_hours":12},"organization_id":"org_x","overwrite_existing":true,"version":7}`},
		{"other", `{"list":[1,2.5,-3e400],"map":{"a":true,"b":false},"set":[{"n":1},{"n":null}],"dynamic":null,"dynlist":null,"tuple":null}`},
	}
	otherJSON = []string{
		``, ` `, `null`, `{}`, `[]`, `"x"`, `1`, `true`, `{`, `{"id":}`, `{"id":"a"}}`, `{"id":"a"} x`, `{"id":"a"} {}`,
		`{"id":"a","id":"b"}`, `{"version":{},"version":1}`, `{"version":1,"version":{}}`, `{"gone":{"a":[1,{"b":null}]},"id":"a"}`,
		`{"gone":[}`, `{"id":1}`, `{"id":true}`, `{"version":"1"}`, `{"version":"x"}`, `{"version":1e0}`, `{"version":1.5}`,
		`{"version":123456789012345678901234567890}`, `{"overwrite_existing":"true"}`, `{"overwrite_existing":"1"}`,
		`{"overwrite_existing":0}`, `{"overwrite_existing":"TRUE"}`, `{"id":"\u00e9\ud800"}`, "{\"id\":\"\xff\"}",
		`{"limits":[]}`, `{"limits":{"max_agents":null,"nope":1}}`, `{"locked_settings":{"allowed_email_domains":"a"}}`,
		`{"locked_settings":{"allowed_email_domains":[null,"a","a"]}}`, `{"locked_settings":{"allowed_email_domains":[1]}}`,
		`{"list":["1"]}`, `{"list":{}}`, `{"map":{"a":"true"}}`, `{"map":[]}`, `{"set":[{"n":1},{"n":1}]}`,
		`{"dynamic":{"type":"string","value":"x"}}`, `{"dynlist":[1]}`, `{"tuple":["a",1]}`,
		`{"id":"a",}`, `{,"id":"a"}`, `{"id" "a"}`, `{1:"a"}`, `{"list":[1,]}`, `{"list":[,1]}`,
	}
)

// TestValueFromJSON: valueFromJSON reads every state as tftypes does, or leaves it to tftypes,
// and reads the states Terraform writes itself.
//
// Fails when: it reads a state differently from tftypes (a value, a type, null for a missing
// attribute, which of a repeated member counts, ...), accepts what tftypes refuses, or leaves
// Terraform's own states to tftypes (then it saves nothing).
func TestValueFromJSON(t *testing.T) {
	types := jsonTypes(t)
	for _, c := range terraformJSON {
		if !sameAsTFTypes(t, c.typ, types[c.typ], []byte(c.json)) {
			t.Errorf("%s %s: left to tftypes", c.typ, c.json)
		}
	}
	for _, data := range otherJSON {
		for name, typ := range types {
			sameAsTFTypes(t, name, typ, []byte(data))
		}
	}
}

// FuzzValueFromJSON: as TestValueFromJSON, for any bytes (go test -fuzz FuzzValueFromJSON).
func FuzzValueFromJSON(f *testing.F) {
	for _, c := range terraformJSON {
		f.Add([]byte(c.json))
	}
	for _, data := range otherJSON {
		f.Add([]byte(data))
	}
	types := jsonTypes(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, typ := range types {
			sameAsTFTypes(t, name, typ, data)
		}
	})
}

// sameAsTFTypes fails t if valueFromJSON reads data as typ differently from tftypes; it says
// whether valueFromJSON read it.
func sameAsTFTypes(t *testing.T, name string, typ tftypes.Type, data []byte) bool {
	t.Helper()
	got, ok := valueFromJSON(data, typ)
	if !ok {
		return false
	}
	want, err := tftypes.ValueFromJSONWithOpts(data, typ, unmarshalOpts.ValueFromJSONOpts)
	if err != nil {
		t.Errorf("%s %q: read as %s; tftypes refuses it: %v", name, data, got, err)
		return true
	}
	if !got.Equal(want) || !got.Type().Equal(want.Type()) {
		t.Errorf("%s %q: read as %s, tftypes reads %s", name, data, got, want)
		return true
	}
	gotMsgPack, err := tfprotov6.NewDynamicValue(typ, got)
	if err != nil {
		t.Errorf("%s %q: %v", name, data, err)
		return true
	}
	wantMsgPack, err := tfprotov6.NewDynamicValue(typ, want)
	if err != nil {
		t.Errorf("%s %q: tftypes' value: %v", name, data, err)
		return true
	}
	if !bytes.Equal(gotMsgPack.MsgPack, wantMsgPack.MsgPack) {
		// tftypes writes a map's entries in Go's map order, different each time: the bytes
		// of a value with a map differ from run to run, what they decode to does not.
		gotBack, gotErr := gotMsgPack.Unmarshal(typ)
		wantBack, wantErr := wantMsgPack.Unmarshal(typ)
		if gotErr != nil || wantErr != nil || !gotBack.Equal(wantBack) {
			t.Errorf("%s %q: msgpack %x, tftypes' %x", name, data, gotMsgPack.MsgPack, wantMsgPack.MsgPack)
		}
	}
	return true
}
