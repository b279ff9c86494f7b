package policydoc

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/server/domain/policyfield"
)

func policy(t *testing.T, doc string) client.Policy {
	t.Helper()
	var p client.Policy
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func keepNone(policyfield.Section) bool { return false }

// A document read from the API and written back is the same document, whatever its fields.
func TestFromAPIToAPIRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, doc := range []string{
		`{"limits": {}, "locked_settings": {}, "entitlements": {}}`,
		`{"limits": {"max_agents": 0, "intake_bytes_per_day": 4611686018427387904}, "locked_settings": {}, "entitlements": {"jobs": false}}`,
		`{"limits": {}, "locked_settings": {"require_sso": true, "session_max_age_hours": 12, "allowed_email_domains": ["b.example", "a.example"]}, "entitlements": {}}`,
		`{"limits": {}, "locked_settings": {"allowed_email_domains": []}, "entitlements": {}}`,
	} {
		d, diags := FromAPI(policy(t, doc), keepNone)
		if diags.HasError() {
			t.Fatalf("%s: %v", doc, diags)
		}
		w, diags := d.ToAPI(ctx)
		if diags.HasError() {
			t.Fatalf("%s: %v", doc, diags)
		}
		same, err := func() (bool, error) {
			a, err := Normal(policy(t, doc))
			if err != nil {
				return false, err
			}
			b, err := Normal(w)
			return reflect.DeepEqual(a, b), err
		}()
		if err != nil || !same {
			got, _ := json.Marshal(w)
			t.Errorf("round trip of %s gave %s", doc, got)
		}
	}
}

func TestFromAPISections(t *testing.T) {
	p := policy(t, `{"limits": {"max_users": 5}, "locked_settings": {}, "entitlements": {}}`)
	d, diags := FromAPI(p, keepNone)
	if diags.HasError() {
		t.Fatal(diags)
	}
	if !d.Section(policyfield.LockedSettings).IsNull() || !d.Section(policyfield.Entitlements).IsNull() {
		t.Error("an empty section the configuration did not have is not null")
	}
	limits := d.Section(policyfield.Limits).Attributes()
	if got := limits["max_users"]; !got.Equal(types.Int64Value(5)) {
		t.Errorf("max_users = %v", got)
	}
	if got := limits["max_agents"]; !got.IsNull() {
		t.Errorf("max_agents = %v, want null (not set by this document)", got)
	}
	if len(limits) != len(policyfield.In(policyfield.Limits)) {
		t.Errorf("limits has %d attributes, the table %d", len(limits), len(policyfield.In(policyfield.Limits)))
	}
	// An empty section the configuration had as an object stays an object.
	kept, _ := FromAPI(p, func(s policyfield.Section) bool { return s == policyfield.Entitlements })
	if kept.Section(policyfield.Entitlements).IsNull() || !kept.Section(policyfield.LockedSettings).IsNull() {
		t.Error("keep was not honoured")
	}
	if !kept.Kept(policyfield.Entitlements) || kept.Kept(policyfield.LockedSettings) {
		t.Error("Kept does not report the sections held as objects")
	}
}

func TestToAPILeavesOutNullsAndNullSections(t *testing.T) {
	limits, diags := types.ObjectValue(AttrTypes(policyfield.Limits), map[string]attr.Value{
		"max_agents": types.Int64Value(3), "max_users": types.Int64Null(), "intake_bytes_per_day": types.Int64Null(),
		"observation_retention_days": types.Int64Null(), "max_jobs_per_day": types.Int64Unknown(),
	})
	if diags.HasError() {
		t.Fatal(diags)
	}
	w, diags := Document{policyfield.Limits: limits}.ToAPI(context.Background())
	if diags.HasError() {
		t.Fatal(diags)
	}
	got, _ := json.Marshal(w)
	if string(got) != `{"limits":{"max_agents":3}}` {
		t.Errorf("ToAPI = %s", got)
	}
}

func TestNormalAndEmpty(t *testing.T) {
	a, err := Normal(policy(t, `{"limits": {}, "locked_settings": {"allowed_email_domains": ["b.example", "a.example", "b.example"]}, "entitlements": {}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Normal(client.PolicyWrite{LockedSettings: &client.LockedSettings{AllowedEmailDomains: &[]string{"a.example", "b.example"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("sets are not compared sorted and without duplicates: %v vs %v", a, b)
	}
	// Large integers compare by their digits.
	x, _ := Normal(policy(t, `{"limits": {"intake_bytes_per_day": 4611686018427387904}, "locked_settings": {}, "entitlements": {}}`))
	y, _ := Normal(policy(t, `{"limits": {"intake_bytes_per_day": 4611686018427387903}, "locked_settings": {}, "entitlements": {}}`))
	if reflect.DeepEqual(x, y) {
		t.Error("2^62 and 2^62-1 compare equal")
	}
	if !Empty(policy(t, `{"organization_id": "org_1", "limits": {}, "locked_settings": {}, "entitlements": {}, "version": 3}`)) {
		t.Error("an empty document is not Empty")
	}
	if Empty(policy(t, `{"limits": {}, "locked_settings": {}, "entitlements": {"owner_export": false}}`)) {
		t.Error("a document setting owner_export false is Empty")
	}
}
