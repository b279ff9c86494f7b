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
	for _, id := range []string{"putPolicy", "createToken", "registerAgent", "importOrganization", "getOrganization"} {
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
	for _, seed := range plainBodySeeds {
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

// TestPlainBodyDecidesTheCreate: a create's valid bodies pass plainly (the validator not asked),
// and each invalid one goes to the validator, which refuses it.
func TestPlainBodyDecidesTheCreate(t *testing.T) {
	var create *Operation
	for _, op := range plainBodyOperations(t) {
		if op.ID == "createOrganization" {
			create = op
		}
	}
	if create == nil {
		t.Fatal("createOrganization's body is not plain")
	}
	valid := 0
	for _, seed := range plainBodySeeds {
		body := []byte(seed)
		if !oneJSONDocument(body) {
			continue
		}
		_, kinErr := validateBodyWithKin(t, create, body)
		_, plain := create.plainBody.passes(body)
		if plain != (kinErr == nil) {
			t.Errorf("%s: plain %v, the validator's error %v", seed, plain, kinErr)
		}
		if plain {
			valid++
		}
	}
	if valid < 4 {
		t.Errorf("%d valid seeds, want at least 4", valid)
	}
}
