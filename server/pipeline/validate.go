package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"mime"
	"net/http"
	"net/mail"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/problem"
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

// readBody reads the body (at most MaxBodyBytes; once: a signed request's was read to check its
// signature) and checks its media type against the operation's.
//
// It, idempotencyKey and bearer, which every request of their kind passes, read the headers they
// check from the header map by their canonical keys (r.Header["Content-Encoding"]): what
// Header.Values returns, without canonicalizing its argument on every call. net/http's server
// stores each header it reads under its canonical key, and so do Header.Set and Header.Add, with
// which the in-process transport's requests are made (TestHeadersAreReadInAnyCase).
func readBody(r *http.Request, st *State) *problem.Error {
	// A coded body would be read as if it were plain: none is accepted.
	for _, ce := range r.Header["Content-Encoding"] {
		if !strings.EqualFold(strings.TrimSpace(ce), "identity") {
			return problem.New(http.StatusUnsupportedMediaType, api.ErrorCodeUnsupportedMediaType,
				"Send the body without Content-Encoding: this API does not decode "+strings.TrimSpace(ce)+".")
		}
	}
	if st.Op.StreamedBody {
		// The handler streams it: only its media type is checked here.
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != StreamedMediaType {
			return problem.Newf(http.StatusUnsupportedMediaType, api.ErrorCodeUnsupportedMediaType, "Send the body as %s.", StreamedMediaType)
		}
		return nil
	}
	if !st.bodyRead {
		body, pe := readAll(r)
		if pe != nil {
			return pe
		}
		st.Body, st.bodyRead = body, true
	}
	rb := st.Op.spec.RequestBody
	if len(st.Body) == 0 || rb == nil || rb.Value == nil {
		return nil
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || rb.Value.Content[mt] == nil {
		return problem.Newf(http.StatusUnsupportedMediaType, api.ErrorCodeUnsupportedMediaType,
			"Send the body as %s.", strings.Join(mediaTypes(rb.Value.Content), " or "))
	}
	if mt != "application/json" {
		return nil
	}
	// The validator decodes the first JSON value only; anything after it must not be ignored.
	if !json.Valid(st.Body) {
		pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The body is not one valid JSON document.")
		pe.Errors = []problem.FieldError{{Field: "body", Message: "malformed JSON"}}
		return pe
	}
	// Two parsers (the validator and the decoder, a proxy and the server) can read an object
	// with a repeated key differently: it is refused.
	if field, dup := duplicateKey(st.Body); dup {
		pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The body repeats a key in one object.")
		pe.Errors = []problem.FieldError{{Field: field, Message: "appears more than once"}}
		return pe
	}
	return nil
}

// duplicateKey finds a key that appears twice in one object of a valid JSON document, and names
// it by its path (e.g. "limits.max_agents"). It scans the bytes without decoding them (it runs
// on every JSON body), comparing keys as raw bytes unless they hold escapes.
func duplicateKey(body []byte) (string, bool) {
	if bytes.IndexByte(body, '{') < 0 {
		return "", false
	}
	type frame struct {
		object   bool
		keyStart int    // in an object: where its keys start in keys
		lastKey  []byte // in an object: the key whose value is being read
		index    int    // in an array: the element being read
	}
	stack := make([]frame, 0, 8)
	keys := make([][]byte, 0, 64) // the keys of the open objects, outermost first
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '{', '[':
			stack = append(stack, frame{object: body[i] == '{', keyStart: len(keys)})
		case '}', ']':
			keys = keys[:stack[len(stack)-1].keyStart]
			stack = stack[:len(stack)-1]
		case ',':
			if top := &stack[len(stack)-1]; !top.object {
				top.index++
			}
		case '"':
			end := i + 1
			escaped := false
			for ; body[end] != '"'; end++ {
				if body[end] == '\\' {
					escaped = true
					end++
				}
			}
			raw := body[i : end+1]
			i = end
			next := end + 1
			for next < len(body) && (body[next] == ' ' || body[next] == '\t' || body[next] == '\n' || body[next] == '\r') {
				next++
			}
			if next >= len(body) || body[next] != ':' {
				continue // a value
			}
			key := raw[1 : len(raw)-1]
			if escaped {
				var k string
				_ = json.Unmarshal(raw, &k) // valid JSON: it decodes
				key = []byte(k)
			}
			top := &stack[len(stack)-1]
			for _, seen := range keys[top.keyStart:] {
				if bytes.Equal(seen, key) {
					var path []string
					for _, f := range stack[:len(stack)-1] {
						if f.object {
							path = append(path, string(f.lastKey))
						} else {
							path = append(path, strconv.Itoa(f.index))
						}
					}
					return strings.Join(append(path, string(key)), "."), true
				}
			}
			keys = append(keys, key)
			top.lastKey = key
		}
	}
	return "", false
}

func mediaTypes(c openapi3.Content) []string {
	var out []string
	for k := range c {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// validate checks the request against the spec (leaving out the headers the pipeline checks
// itself) and lists each bad field.
func validate(ctx context.Context, r *http.Request, st *State) *problem.Error {
	pathParams := st.pathParams
	// Nothing left to validate: the path parameters matched their patterns (see pathOnly).
	if st.Op.pathOnly && st.wellFormed && r.URL.RawQuery == "" && unstorable(nil, pathParams, st.Body) == nil {
		return nil
	}
	// A malformed escape would otherwise drop its parameter silently (url.Values skips it).
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The query string is malformed.")
		pe.Errors = []problem.FieldError{{Field: "query", Message: err.Error()}}
		return pe
	}
	if pe := unstorable(query, pathParams, st.Body); pe != nil {
		return pe
	}
	// The validator judges the first value of a parameter sent twice, the generated handler
	// refuses the two: refused here, naming it.
	for _, name := range st.Op.singleQuery {
		if len(query[name]) > 1 {
			pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The query repeats a parameter that takes one value.")
			pe.Errors = []problem.FieldError{{Field: name, Message: "appears more than once"}}
			return pe
		}
	}
	if err := validateRequest(ctx, r, st); err != nil {
		pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The request does not match the API description; see errors.")
		pe.Errors = fieldErrors(err, "")
		if len(pe.Errors) == 0 {
			pe.Errors = []problem.FieldError{{Field: "", Message: "invalid request"}}
		}
		return pe
	}
	return nil
}

// validateRequest runs kin-openapi's validator on the request. With KeepValidatedValue, the
// value it decoded and passed is the one the handler binds (runtime.BindJSONBody), instead of a
// second decoding of the body. Defaults are not set: the handlers read a field left out as left
// out (and no required property of a request body has a default that setting it would
// satisfy: TestRequestDefaults).
func validateRequest(ctx context.Context, r *http.Request, st *State) error {
	// A streamed body is not the validator's: it would read it whole (its security check
	// buffers the body for authentication functions) and close it.
	streamed := st.Op.StreamedBody
	body := r.Body
	if streamed {
		r.Body = http.NoBody
	} else {
		r.Body = io.NopCloser(bytes.NewReader(st.Body))
	}
	err := openapi3filter.ValidateRequest(ctx, &openapi3filter.RequestValidationInput{
		Request: r, PathParams: st.pathParams, Route: st.Op.validation,
		Options: &openapi3filter.Options{MultiError: true,
			ExcludeRequestBody: streamed, SkipSettingDefaults: true, KeepValidatedValue: true,
			SchemaValidationOptions: schemaOptions},
	})
	if streamed {
		r.Body = body
		return err
	}
	if v, ok := r.Body.(validatedValue); ok && err == nil {
		st.validated = bindableIntegers(v.ValidatedValue(), st.Op.jsonBodySchema())
	}
	r.Body = handlerBody(st)
	return err
}

// jsonBodySchema is the schema of the operation's JSON request body, or nil.
func (o *Operation) jsonBodySchema() *openapi3.SchemaRef {
	if rb := o.spec.RequestBody; rb != nil && rb.Value != nil {
		if mt := rb.Value.Content.Get("application/json"); mt != nil {
			return mt.Schema
		}
	}
	return nil
}

// bindableIntegers is v, a body the validator passed, with each number where its schema wants
// an integer and that is one written otherwise (1e2, 30.0: JSON Schema takes them for the
// integers they are) written as that integer (integerText), so that the handler's integer field
// binds the value the validator passed. v is changed in place. Values under schemas that
// combine others are left as they are.
func bindableIntegers(v any, ref *openapi3.SchemaRef) any {
	if ref == nil || ref.Value == nil {
		return v
	}
	s := ref.Value
	switch v := v.(type) {
	case json.Number:
		if s.Type.Is(openapi3.TypeInteger) {
			return integerText(v)
		}
	case map[string]any:
		for k, member := range v {
			child := s.Properties[k]
			if child == nil {
				child = s.AdditionalProperties.Schema
			}
			v[k] = bindableIntegers(member, child)
		}
	case []any:
		for i, item := range v {
			v[i] = bindableIntegers(item, s.Items)
		}
	}
	return v
}

// integerText is n written as an integer when it is one written otherwise (1e2, 100.0,
// 10000e-2). Anything else is left as written: a number with a fraction, beyond int64, longer
// than 64 characters or with an exponent beyond ±40 (the validator or the binding refuses it).
func integerText(n json.Number) json.Number {
	text := string(n)
	if len(text) > 64 || !strings.ContainsAny(text, ".eE") {
		return n
	}
	if _, exp, ok := strings.Cut(strings.ToLower(text), "e"); ok {
		if e, err := strconv.Atoi(exp); err != nil || e < -40 || e > 40 {
			return n
		}
	}
	r, ok := new(big.Rat).SetString(text)
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return n
	}
	return json.Number(strconv.FormatInt(r.Num().Int64(), 10))
}

// schemaOptions are the validator's own formats. format: email is checked as the generated
// types read it (openapi_types.Email: net/mail's ParseAddress), which kin-openapi does not do by
// default: a malformed address is refused naming its field, not by binding ("The request could
// not be read").
var schemaOptions = []openapi3.SchemaValidationOption{
	openapi3.WithStringFormatValidator("email", openapi3.NewCallbackValidator(func(s string) error {
		if _, err := mail.ParseAddress(s); err != nil {
			return errors.New("not an email address")
		}
		return nil
	})),
}

// validatedValue is the body kin-openapi's validator leaves (Options.KeepValidatedValue): the
// value it decoded and passed.
type validatedValue interface{ ValidatedValue() any }

// boundBody is the body a handler reads after validation: the bytes as sent, and the value the
// validator passed, which the generated handlers bind (runtime.BindJSONBody binds from
// ValidatedValue; it decodes the bytes only when the value does not fit the handler's type).
type boundBody struct {
	io.ReadCloser
	value any
}

func (b boundBody) ValidatedValue() any { return b.value }

// handlerBody is the body a handler reads: the bytes as sent, and the value the validator passed
// when it passed one (an empty body has none).
func handlerBody(st *State) io.ReadCloser {
	raw := io.NopCloser(bytes.NewReader(st.Body))
	if st.validated == nil {
		return raw
	}
	return boundBody{ReadCloser: raw, value: st.validated}
}

// storable reports whether text can be stored as PostgreSQL text: valid UTF-8 without NUL
// (which no schema of the spec can express, and which would otherwise fail in the database).
func storable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// unstorable finds request text PostgreSQL could not store (in the path parameters, the query,
// the body), naming where it is.
func unstorable(query url.Values, pathParams map[string]string, body []byte) *problem.Error {
	bad := func(field string) *problem.Error {
		pe := problem.New(http.StatusBadRequest, api.ErrorCodeInvalidRequest, "The request contains text that is not valid UTF-8 or contains NUL.")
		pe.Errors = []problem.FieldError{{Field: field, Message: "must be valid UTF-8 without NUL characters"}}
		return pe
	}
	for name, v := range pathParams {
		if !storable(v) {
			return bad(name)
		}
	}
	for name, vs := range query {
		for _, v := range vs {
			if !storable(name) || !storable(v) {
				return bad(name)
			}
		}
	}
	if !utf8.Valid(body) {
		return bad("body")
	}
	// In JSON, NUL and lone surrogates hide behind escapes: decode, then look at every string
	// (keys too). A lone surrogate decodes to U+FFFD, which is storable; a handler that passes
	// raw JSON to PostgreSQL re-encodes it (see SubmitObservations).
	if len(body) > 0 && bytes.Contains(body, []byte(`\u`)) {
		var v any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if dec.Decode(&v) == nil && !storableJSON(v) {
			return bad("body")
		}
	}
	return nil
}

func storableJSON(v any) bool {
	switch t := v.(type) {
	case string:
		return storable(t)
	case []any:
		for _, e := range t {
			if !storableJSON(e) {
				return false
			}
		}
	case map[string]any:
		for k, e := range t {
			if !storable(k) || !storableJSON(e) {
				return false
			}
		}
	}
	return true
}

// structured reports whether err is one of the validator's own error types, which fieldErrors
// reads field by field.
func structured(err error) bool {
	switch err.(type) { //nolint:errorlint // the concrete type decides, as in fieldErrors
	case openapi3.MultiError, *openapi3filter.RequestError, *openapi3.SchemaError, *openapi3filter.ParseError:
		return true
	}
	return false
}

// fieldErrors lists the fields a validation error names.
func fieldErrors(err error, field string) []problem.FieldError {
	// Walk the concrete error tree (not errors.As, which would skip past the RequestError that
	// names the parameter to the errors inside it).
	switch e := err.(type) { //nolint:errorlint // walking the concrete tree is the point (see above)
	case openapi3.MultiError:
		var out []problem.FieldError
		for _, inner := range e {
			out = append(out, fieldErrors(inner, field)...)
		}
		return out
	case *openapi3filter.RequestError:
		switch {
		case e.Parameter != nil:
			field = e.Parameter.Name
		case e.RequestBody != nil:
			field = "body"
		}
		// The error inside names the field more precisely when it is one of the validator's own
		// (a schema error with its JSON pointer, ...); otherwise the RequestError's reason says it
		// best ("value is required but missing").
		if e.Err != nil && (structured(e.Err) || e.Reason == "") {
			if inner := fieldErrors(e.Err, field); len(inner) > 0 {
				return inner
			}
		}
		return []problem.FieldError{{Field: field, Message: e.Reason}}
	case *openapi3.SchemaError:
		f := field
		if ptr := e.JSONPointer(); len(ptr) > 0 {
			if f == "body" {
				f = ""
			} else if f != "" {
				f += "."
			}
			f += strings.Join(ptr, ".")
		}
		return []problem.FieldError{{Field: f, Message: e.Reason}}
	case *openapi3filter.ParseError:
		return []problem.FieldError{{Field: field, Message: "malformed value"}}
	}
	if u, ok := err.(interface{ Unwrap() error }); ok && u.Unwrap() != nil {
		return fieldErrors(u.Unwrap(), field)
	}
	return []problem.FieldError{{Field: field, Message: "invalid value"}}
}
