package server

import (
	"net/http/httptest"
	"testing"

	"renga.dev/renga/gen/api"
)

// TestHomeAnswerIsTheGeneratedOne holds the home answer, encoded once, to what the generated
// response writes for the same document: status, headers and body, byte for byte, for URLs
// whose JSON needs escaping too.
func TestHomeAnswerIsTheGeneratedOne(t *testing.T) {
	for _, u := range []string{
		"https://renga.example", "http://127.0.0.1:8080", "https://eu1.renga.example/base/",
		"https://renga.example/?a=1&b=<2>", "https://ré.example/\u2028\"\\", "",
	} {
		a, err := newHomeAnswer(u)
		if err != nil {
			t.Fatal(err)
		}
		got, want := httptest.NewRecorder(), httptest.NewRecorder()
		if err := a.VisitGetHomeResponse(got); err != nil {
			t.Fatal(err)
		}
		if err := (api.GetHome200JSONResponse{Body: api.Home{Home: u}}).VisitGetHomeResponse(want); err != nil {
			t.Fatal(err)
		}
		if got.Code != want.Code || got.Body.String() != want.Body.String() || len(got.Header()) != len(want.Header()) {
			t.Errorf("%q: got %d %v %q, want %d %v %q", u, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
		for k, v := range want.Header() {
			if g := got.Header()[k]; len(g) != len(v) || g[0] != v[0] {
				t.Errorf("%q: header %s = %v, want %v", u, k, g, v)
			}
		}
	}
}
