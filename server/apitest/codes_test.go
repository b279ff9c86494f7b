package apitest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"renga.dev/renga/gen/api"
)

// TestEveryErrorCodeIsAnswered: the spec's ErrorCode enum is exactly the set of codes the
// server's code can answer (every api.ErrorCode* constant the server's non-test code names).
// A code declared and never used, or the other way round, fails.
// Fails when: the server stops naming a code it declares (method_not_allowed answered as a
// literal and left out of problem's titles): "declares codes no server code answers".
func TestEveryErrorCodeIsAnswered(t *testing.T) {
	spec, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, c := range spec.Components.Schemas["ErrorCode"].Value.Enum {
		declared[c.(string)] = true //nolint:forcetypeassert // the enum is of strings
	}
	// The constants' names map to the codes through the generated values.
	byName := map[string]string{}
	for name, code := range errorCodeConstants(t) {
		byName[name] = code
	}
	used := map[string]bool{}
	fset := token.NewFileSet()
	err = filepath.WalkDir("../../server", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "api" && strings.HasPrefix(sel.Sel.Name, "ErrorCode") {
					if code, ok := byName[sel.Sel.Name]; ok {
						used[code] = true
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var unused []string
	for code := range declared {
		if !used[code] {
			unused = append(unused, code)
		}
	}
	slices.Sort(unused)
	if len(unused) > 0 {
		t.Errorf("ErrorCode declares codes no server code answers: %v", unused)
	}
	if len(used) < 20 {
		t.Errorf("found %d codes in the server's code: the walk is broken", len(used))
	}
}

// errorCodeConstants reads gen/api's ErrorCode constants: name → code.
func errorCodeConstants(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../../gen/api/api.gen.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs, ok := spec.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "ErrorCode") {
				continue
			}
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok {
				out[vs.Names[0].Name] = strings.Trim(lit.Value, `"`)
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no ErrorCode constants found in gen/api")
	}
	return out
}
