package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"renga.dev/renga/server/servertest"
)

var (
	insertInto = regexp.MustCompile(`(?i)INSERT INTO (\w+)(?: AS \w+)? \(([^)]*)\)`)
	readFrom   = regexp.MustCompile(`(?i)\bFROM (\w+)`)
	space      = regexp.MustCompile(`\s+`)
)

// shape is what a list of statements writes and reads: each INSERT's table and columns, each
// table read FROM, and how many statements there are (BEGIN and COMMIT included).
func shape(statements []string) []string {
	var out []string
	for _, s := range statements {
		s = space.ReplaceAllString(s, " ")
		for _, m := range insertInto.FindAllStringSubmatch(s, -1) {
			out = append(out, "insert "+m[1]+" ("+strings.Join(strings.Fields(strings.ReplaceAll(m[2], ",", " ")), ",")+")")
		}
		for _, m := range readFrom.FindAllStringSubmatch(s, -1) {
			out = append(out, "read "+m[1])
		}
	}
	slices.Sort(out)
	return append(out, "statements "+strings.Repeat("|", len(statements)))
}

// TestCreateStatementsFollowTheServer: bench/sql/create_statements.sql, which bench/run.sh and
// bench/statement.sh send from pgbench as the least any server sending a keyed create's
// statements could cost, is a copy of the server's statements made by hand. This holds the copy
// to what the server sends for one keyed create: the same number of statements, inserting the
// same columns into the same tables and reading the same tables.
//
// Fails when: a statement of the create gains or loses a column (the audit event's target_email,
// say) or a statement, and the copy is not changed with it.
func TestCreateStatementsFollowTheServer(t *testing.T) {
	log := &servertest.RoundTrips{}
	env := servertest.StartTraced(t, log)
	token := env.Token(t, "organizations:write")
	c := httpClient()
	create := func(slug string) {
		req, _ := http.NewRequest(http.MethodPost, env.URL+"/api/v1/operator/organizations",
			bytes.NewBufferString(`{"slug":"`+slug+`","display_name":"Statements"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "key-"+slug)
		do(t, c, req, http.StatusCreated)
	}
	create("warm-up") // the token's first read is not a create's
	log.Take()
	create("measured")
	server := servertest.Statements(log.Take())

	copied := copiedStatements(t, "sql/create_statements.sql")
	if got, want := shape(copied), shape(server); !slices.Equal(got, want) {
		t.Errorf("bench/sql/create_statements.sql no longer sends what the server sends for a create:\ncopy:   %q\nserver: %q\nthe server's statements:\n%s",
			got, want, strings.Join(server, "\n---\n"))
	}
}

// TestIntakeStatementsFollowTheServer: bench/statement.sh runs intake's statements from pgbench
// beside A, from two copies made by hand: bench/sql/intake_statement.sql, the statement for a
// batch sent alone (domain.acceptBatch), written for pgbench, and
// bench/sql/intake_group_statement.sql, the statement for a group of batches
// (domain.acceptBatches) with its arrays written out. This holds them to what the server sends:
// the single copy, one statement, inserts the same columns into the same tables and reads the
// same tables as the server's for one batch; the group copy is the text of the server's for a
// group (which concurrent batches make) but for the arrays it reads and the counter's shard,
// white space aside.
//
// Fails when: an intake statement changes (a column, a table, a condition of the group's) and
// its copy is not changed with it.
func TestIntakeStatementsFollowTheServer(t *testing.T) {
	log := &servertest.RoundTrips{}
	env := servertest.StartTraced(t, log)
	agents := registerAgents(t, env, 16)
	c := httpClient()
	var seq atomic.Int64
	send := func(a agent) {
		do(t, c, a.signed(env.URL, "/api/v1/agent/observations", batchBody(t, fmt.Sprint("b-", seq.Add(1)))), http.StatusAccepted)
	}
	intake := func(statements []string, group bool) []string {
		var out []string
		for _, s := range statements {
			if strings.Contains(s, "INSERT INTO observations") && strings.Contains(s, "FROM unnest(") == group {
				out = append(out, s)
			}
		}
		return out
	}
	for _, a := range agents {
		send(a) // each installation's first batch reads its key; the next take it from the cache
	}
	log.Take()
	send(agents[0])
	single := intake(servertest.Statements(log.Take()), false)
	if len(single) != 1 {
		t.Fatalf("the server stored one batch with %d statements, want 1:\n%s", len(single), strings.Join(single, "\n---\n"))
	}
	var tables []string
	if err := env.Pool.QueryRow(context.Background(), `SELECT array_agg(tablename::text) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if got, want := tableShape(copiedStatements(t, "sql/intake_statement.sql"), tables), tableShape(single, tables); !slices.Equal(got, want) {
		t.Errorf("bench/sql/intake_statement.sql no longer does what the server's statement for one batch does:\ncopy:   %q\nserver: %q\nthe server's statement:\n%s", got, want, single[0])
	}

	// Batches from 16 agents at once: while the server's intake statements run, the batches
	// arriving go together in the next one.
	var group []string
	for round := 0; round < 20 && len(group) == 0; round++ {
		var wg sync.WaitGroup
		for _, a := range agents {
			wg.Go(func() {
				for range 4 {
					send(a)
				}
			})
		}
		wg.Wait()
		group = intake(servertest.Statements(log.Take()), true)
	}
	if len(group) == 0 {
		t.Fatal("20 rounds of 64 batches from 16 agents at once, and no group statement")
	}
	copied := copiedStatements(t, "sql/intake_group_statement.sql")
	if len(copied) != 1 {
		t.Fatalf("sql/intake_group_statement.sql holds %d statements, want 1", len(copied))
	}
	if got, want := intakeText(copied[0]), intakeText(group[0]); got != want {
		t.Errorf("bench/sql/intake_group_statement.sql is no longer the server's statement for a group:\ncopy:   %s\nserver: %s", got, want)
	}
}

// copiedStatements are the statements of a pgbench script in bench/sql (scriptRoundTrips), in
// order.
func copiedStatements(t *testing.T, path string) []string {
	t.Helper()
	return slices.Concat(scriptRoundTrips(t, path)...)
}

// scriptRoundTrips are the statements of a pgbench script in bench/sql, one list per round trip:
// its lines but blank ones, comments and meta-commands, each statement ending at a line ending in
// a semicolon (left out), a new round trip at each line "-- round trip" (the whole script one
// round trip where it has none).
func scriptRoundTrips(t *testing.T, path string) [][]string {
	t.Helper()
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	trips := [][]string{nil}
	var cur strings.Builder
	for line := range strings.SplitSeq(string(file), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "-- round trip"):
			if len(trips[len(trips)-1]) > 0 {
				trips = append(trips, nil)
			}
			continue
		case trimmed == "" || strings.HasPrefix(trimmed, "--") || strings.HasPrefix(line, `\`):
			continue
		}
		cur.WriteString(line + "\n")
		if strings.HasSuffix(trimmed, ";") {
			trips[len(trips)-1] = append(trips[len(trips)-1], strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if cur.Len() > 0 {
		t.Fatalf("%s ends inside a statement: %q", path, cur.String())
	}
	return trips
}

var (
	unnestArgs = regexp.MustCompile(`(?s)FROM unnest\(.*?\) WITH ORDINALITY`)
	// The server's counter shard (domain's intakeShard: its pool slot), which pgbench's copy
	// takes from its client number.
	serverShard = regexp.MustCompile(`coalesce\(nullif\(current_setting\('[\w.]+', true\), ''\)::smallint, \(pg_backend_pid\(\) % 1024\)::smallint\)`)
)

// intakeText is intake's statement without what the server and pgbench give it differently:
// white space, the arrays it reads (the server's parameters, the copy's literals) and the shard.
func intakeText(s string) string {
	s = strings.TrimSuffix(strings.TrimSpace(space.ReplaceAllString(s, " ")), ";")
	s = unnestArgs.ReplaceAllString(s, "FROM unnest(…) WITH ORDINALITY")
	s = serverShard.ReplaceAllString(s, "SHARD")
	return strings.ReplaceAll(s, ":client_id::smallint", "SHARD")
}

// tableShape is shape without the names of common table expressions: each INSERT's table and
// columns, each of tables read, and how many statements there are.
func tableShape(statements []string, tables []string) []string {
	var out []string
	for _, s := range shape(statements) {
		if name, ok := strings.CutPrefix(s, "read "); ok && !slices.Contains(tables, name) {
			continue
		}
		out = append(out, s)
	}
	return slices.Compact(out)
}
