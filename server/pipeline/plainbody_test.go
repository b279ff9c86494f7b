package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
)

// plainBodyOperations are the spec's operations whose body validate can judge itself.
func plainBodyOperations(t testing.TB) []*Operation {
	var out []*Operation
	for _, op := range specOperations(t) {
		if op.plainBody != nil {
			out = append(out, op)
		}
	}
	slices.SortFunc(out, func(a, b *Operation) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// validateBodyWithKin is the validator's judgement of a request of op with body (and path
// parameters that match their patterns), and the value it passes.
func validateBodyWithKin(t testing.TB, op *Operation, body []byte) (any, error) {
	path := op.Route
	params := map[string]string{}
	for name, re := range op.pathPatterns {
		params[name] = matching(t, re.String())
		path = strings.ReplaceAll(path, "{"+name+"}", params[name])
	}
	r := httptest.NewRequest(op.Method, path, bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	err := openapi3filter.ValidateRequest(context.Background(), &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: op.validation,
		Options: &openapi3filter.Options{MultiError: true, SkipSettingDefaults: true, KeepValidatedValue: true,
			SchemaValidationOptions: schemaOptions},
	})
	if err != nil {
		return nil, err
	}
	v, _ := r.Body.(validatedValue)
	if v == nil {
		t.Fatalf("%s: the validator passed %q and kept no value", op.ID, body)
	}
	return v.ValidatedValue(), nil
}

// TestPlainBodyOperations: the operations whose body is an object of plain strings are judged
// by validate itself; those whose body is anything more are not.
func TestPlainBodyOperations(t *testing.T) {
	var ids []string
	for _, op := range plainBodyOperations(t) {
		ids = append(ids, op.ID)
	}
	t.Logf("plainBody: %d operations: %v", len(ids), ids)
	for _, id := range []string{"createOrganization", "updateOrganization"} {
		if !slices.Contains(ids, id) {
			t.Errorf("%s's body is not plain (plain: %v)", id, ids)
		}
	}
	for _, id := range []string{"putPolicy", "createToken", "importOrganization", "getOrganization"} {
		if slices.Contains(ids, id) {
			t.Errorf("%s's body is plain", id)
		}
	}
}

// plainBodySeeds are bodies for the create's schema and near it: valid, and each way of not.
var plainBodySeeds = []string{
	`{"slug":"acme","display_name":"Acme Corporation"}`,
	`{"display_name":"Acme","slug":"a-1"}`,
	` { "slug" : "abc" , "display_name" : "\u00e9\ud83d\ude00" } `,
	`{"slug":"acme","display_name":"` + strings.Repeat("é", 200) + `"}`,
	`{"slug":"acme","display_name":"` + strings.Repeat("🙂", 200) + `"}`,
	`{"slug":"acme","display_name":"` + strings.Repeat("a", 201) + `"}`,
	`{"slug":"acme","display_name":""}`,
	`{"slug":"acme","display_name":"tab\there"}`,
	`{"slug":"acme","display_name":"\u007f"}`,
	`{"slug":"Acme","display_name":"Acme"}`,
	`{"slug":"ab","display_name":"Acme"}`,
	`{"slug":"acme-","display_name":"Acme"}`,
	`{"slug":"acme"}`,
	`{"display_name":"Acme"}`,
	`{"slug":"acme","display_name":"Acme","extra":1}`,
	`{"slug":"acme","display_name":null}`,
	`{"slug":1,"display_name":"Acme"}`,
	`{"slug":"acme","display_name":["Acme"]}`,
	`{"slug":"acme","display_name":{"x":"y"}}`,
	`{}`, `[]`, `"acme"`, `null`, `1`, ``, `{"slug":"acme","display_name":"Acme"} {}`,
	`{"slug":"acme","display_name":"A\nB"}`,
}

// FuzzPlainBodyIsTheValidators: a body validate passes without the validator (plainObject) is
// one the validator passes, with the same value; it is never the other way round for a body the
// validator refuses. Seeds: the create's bodies, valid and each way invalid.
func FuzzPlainBodyIsTheValidators(f *testing.F) {
	ops := plainBodyOperations(f)
	if len(ops) == 0 {
		f.Fatal("no operation with a plain body")
	}
	for _, seed := range append(plainBodySeeds, batchSeeds...) {
		f.Add([]byte(seed))
	}
	for _, op := range ops { // each operation's own example, where the spec gives one
		if ex := op.plainBody.schema.Value.Example; ex != nil {
			b, err := json.Marshal(ex)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !oneJSONDocument(body) || unstorable(nil, nil, body) != nil {
			return // refused before validate's checks (readBody, unstorable)
		}
		for _, op := range ops {
			v, plain := op.plainBody.passes(body)
			if !plain {
				continue
			}
			want, err := validateBodyWithKin(t, op, body)
			if err != nil {
				t.Fatalf("%s: %s passes plainly, the validator refuses it: %v", op.ID, body, err)
			}
			if !reflect.DeepEqual(any(v), want) {
				t.Fatalf("%s: %s: plain value %#v, the validator's %#v", op.ID, body, v, want)
			}
		}
	})
}

// batchSeeds are observation batches, valid and each way not.
var batchSeeds = []string{
	`{"batch_id":"b-1","observations":[{"observed_at":"2026-12-01T12:00:00Z","kind":"host.facts","data":{"hostname":"web-1","n":1.5e3,"list":[1,null,{"x":true}]}}]}`,
	`{"observations":[{"kind":"k","data":{},"observed_at":"2026-12-01T12:00:00.123456+01:00"},{"observed_at":"2026-02-28T23:59:60Z","kind":"a_b-c.d","data":{"":""}}],"batch_id":"~!"}`,
	`{"batch_id":"b-1","observations":[]}`,
	`{"batch_id":"","observations":[{"observed_at":"2026-12-01T12:00:00Z","kind":"k","data":{}}]}`,
	`{"batch_id":"b 1","observations":[{"observed_at":"2026-12-01T12:00:00Z","kind":"k","data":{}}]}`,
	`{"batch_id":"` + strings.Repeat("b", 129) + `","observations":[{"observed_at":"2026-12-01T12:00:00Z","kind":"k","data":{}}]}`,
	`{"batch_id":"b-1","observations":[{"observed_at":"2026-12-01 12:00:00Z","kind":"k","data":{}}]}`,
	`{"batch_id":"b-1","observations":[{"observed_at":"2026-13-01T12:00:00Z","kind":"k","data":{}}]}`,
	`{"batch_id":"b-1","observations":[{"observed_at":"2026-02-30T12:00:00Z","kind":"k","data":{}}]}`,
	`{"batch_id":"b-1","observations":[{"observed_at":"2026-12-01T12:00:00Z","kind":"Host","data":{}}]}`,
	`{"batch_id":"b-1","observations":[{"observed_at":"2026-12-01T12:00:00Z","kind":"","data":{}}]}`,
	`{"batch_id":"b-1","observations":[{"observed_at":"2026-12-01T12:00:00Z","kind":"k","data":[]}]}`,
	`{"batch_id":"b-1","observations":[{"observed_at":"2026-12-01T12:00:00Z","kind":"k","data":null}]}`,
	`{"batch_id":"b-1","observations":[{"observed_at":"2026-12-01T12:00:00Z","kind":"k","data":"x"}]}`,
	`{"batch_id":"b-1","observations":[{"observed_at":"2026-12-01T12:00:00Z","kind":"k"}]}`,
	`{"batch_id":"b-1","observations":[{"observed_at":"2026-12-01T12:00:00Z","kind":"k","data":{},"x":1}]}`,
	`{"batch_id":"b-1","observations":[null]}`,
	`{"batch_id":"b-1","observations":{}}`,
	`{"batch_id":"b-1","observations":[` + strings.TrimSuffix(strings.Repeat(`{"observed_at":"2026-12-01T12:00:00Z","kind":"k","data":{}},`, 1001), ",") + `]}`,
	`{"batch_id":"b-1","observations":[` + strings.TrimSuffix(strings.Repeat(`{"observed_at":"2026-12-01T12:00:00Z","kind":"k","data":{}},`, 1000), ",") + `]}`,
}

// TestPlainBodyDecidesTheHotBodies: a create's and an observation batch's valid bodies pass
// plainly (the validator not asked), and each invalid one goes to the validator, which refuses
// it.
func TestPlainBodyDecidesTheHotBodies(t *testing.T) {
	ops := map[string]*Operation{}
	for _, op := range plainBodyOperations(t) {
		ops[op.ID] = op
	}
	for id, seeds := range map[string][]string{"createOrganization": plainBodySeeds, "submitObservations": batchSeeds} {
		op := ops[id]
		if op == nil {
			t.Fatalf("%s's body is not plain", id)
		}
		valid := 0
		for _, seed := range seeds {
			body := []byte(seed)
			if !oneJSONDocument(body) {
				continue
			}
			_, kinErr := validateBodyWithKin(t, op, body)
			_, plain := op.plainBody.passes(body)
			if plain != (kinErr == nil) {
				t.Errorf("%s: %.200s: plain %v, the validator's error %v", id, seed, plain, kinErr)
			}
			if plain {
				valid++
			}
		}
		if valid < 2 {
			t.Errorf("%s: %d valid seeds, want at least 2", id, valid)
		}
	}
}
