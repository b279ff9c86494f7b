package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/oapi-codegen/runtime"

	// Every package of the project that a binary links, so that their init functions have run.
	_ "renga.dev/renga/agent"
	_ "renga.dev/renga/cli"
	"renga.dev/renga/gen/client"
	_ "renga.dev/renga/server"
	_ "renga.dev/renga/server/pipeline"
)

// TestClientDecodesWithTheDefaultCodec: with the project's packages linked, the generated client
// decodes a response as encoding/json does (an email through the runtime's types, which call
// back into the runtime's codec, included), the runtime's codec behaves as its default (the
// streaming encoding/json: a newline after an encoded value, data after a decoded value
// ignored), and kin-openapi decodes JSON bodies with its own decoder.
//
// Fails when: a package of the project sets the runtime's JSON codec or registers a body decoder
// of its own (see TestNoLibraryCodecIsReplaced).
func TestClientDecodesWithTheDefaultCodec(t *testing.T) {
	body := `{"id":"inv_1","organization_id":"org_1","email":"Ada.Lovelace+x@Example.COM","state":"pending",` +
		`"created_at":"2026-12-01T10:00:00.123456789+02:00","expires_at":"2026-12-08T10:00:00Z","accepted_at":null,` +
		`"revoked_at":null,"unknown":{"a":[1,"<&>"]},"State":"expired"}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	c, err := client.NewClientWithResponses(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetInvitationWithResponse(context.Background(), "org_1", "inv_1")
	if err != nil || got.JSON200 == nil {
		t.Fatalf("GetInvitation: %v, %+v", err, got)
	}
	var want client.Invitation
	if err := json.Unmarshal([]byte(body), &want); err != nil {
		t.Fatal(err)
	}
	// encoding/json matches a member's name to a field's case-insensitively.
	if !reflect.DeepEqual(*got.JSON200, want) || want.State != "expired" {
		t.Errorf("the client decoded\n%+v\nencoding/json decodes\n%+v", *got.JSON200, want)
	}

	v := map[string]any{"html": "<&>", "raw": json.RawMessage(` [ 1 , 2 ] `), "email": client.Email("a@b.example")}
	var line bytes.Buffer
	if err := json.NewEncoder(&line).Encode(v); err != nil {
		t.Fatal(err)
	}
	var written bytes.Buffer
	if err := runtime.JSONMarshalWrite(&written, v); err != nil || written.String() != line.String() {
		t.Errorf("JSONMarshalWrite = %q (%v), want encoding/json's Encoder's %q", written.String(), err, line.String())
	}
	if b, err := runtime.JSONMarshal(v); err != nil || string(b)+"\n" != line.String() {
		t.Errorf("JSONMarshal = %s (%v), want encoding/json's %s", b, err, line.String())
	}
	var read map[string]any
	if err := runtime.JSONUnmarshalRead(strings.NewReader(`{"a":1} not JSON`), &read); err != nil || read["a"] != 1.0 {
		t.Errorf("JSONUnmarshalRead = %v (%v), want encoding/json's Decoder's: the first value, a float64", read, err)
	}

	registered := openapi3filter.RegisteredBodyDecoder("application/json")
	if registered == nil || reflect.ValueOf(registered).Pointer() != reflect.ValueOf(openapi3filter.JSONBodyDecoder).Pointer() {
		t.Error("kin-openapi's JSON body decoder is not its own JSONBodyDecoder")
	}
}

// libraryGlobals are the functions that change a library's JSON codec or body decoders for the
// whole process.
var libraryGlobals = map[string]bool{"SetJSONCodec": true, "RegisterBodyDecoder": true,
	"UnregisterBodyDecoder": true, "RegisterBodyEncoder": true, "UnregisterBodyEncoder": true}

// TestNoLibraryCodecIsReplaced: no Go file of the project (generated code aside) calls a function
// that replaces a library's JSON codec or body decoder process-wide: each dependency is used as
// published, and a binary that links a package of the project gets the libraries' defaults.
func TestNoLibraryCodecIsReplaced(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("%s is not the module's root: %v", root, err)
	}
	files := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "gen" || name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			if call, ok := n.(*ast.CallExpr); ok {
				if sel, ok := call.Fun.(*ast.SelectorExpr); ok && libraryGlobals[sel.Sel.Name] {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s calls %s: a library's codec or decoder is replaced process-wide", rel, sel.Sel.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Errorf("%d Go files read: the project was not walked", files)
	}
}
