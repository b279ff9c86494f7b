package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"renga.dev/renga/server/servertest"
)

// TestTableCellsShowHiddenCharacters: text stored before the API refused hidden characters in
// names (here written into the database directly, as an old release or an import left it) is
// printed with each such character as its escape, in a table and piped alike: an override cannot
// reverse the rest of the line, an escape sequence cannot reach the terminal, and a tab or
// newline cannot break a row. -o json prints the API's JSON as it is.
// Fails when: printTable writes cells as they are (the raw U+202E in the output).
func TestTableCellsShowHiddenCharacters(t *testing.T) {
	t.Parallel()
	e := servertest.Start(t)
	remote, _ := modes(t, e, e.Token(t, servertest.AllScopes()...))
	created := run(t, remote, "-o", "json", "org", "create", "hidden", "--display-name", "Hidden")
	var org struct{ ID string }
	if err := json.Unmarshal([]byte(created.stdout), &org); err != nil || org.ID == "" {
		t.Fatalf("create: %+v", created)
	}
	const stored = "Evil\u202eCorp\x1b[31m\tX\nY"
	if _, err := e.Pool.Exec(context.Background(), `UPDATE organizations SET display_name = $1 WHERE id = $2`, stored, org.ID); err != nil {
		t.Fatal(err)
	}
	const shown = `Evil\u202ECorp\u001B[31m\u0009X\u000AY`
	// -o table aligns a table; without it, piped (as here), rows are tab-separated.
	for _, output := range [][]string{{"-o", "table"}, nil} {
		for _, args := range [][]string{{"org", "list"}, {"org", "get", org.ID}} {
			r := run(t, remote, append(output, args...)...)
			if r.code != 0 {
				t.Fatalf("%s %v: %+v", output, args, r)
			}
			if !strings.Contains(r.stdout, shown) || strings.ContainsAny(r.stdout, "\u202e\x1b") {
				t.Errorf("%s %v printed %q, want the name as %s", output, args, r.stdout, shown)
			}
		}
	}
	r := run(t, remote, "-o", "json", "org", "get", org.ID)
	var got struct {
		DisplayName string `json:"display_name"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.DisplayName != stored {
		t.Errorf("-o json: %q (%v), want the display name as stored", r.stdout, err)
	}
}
