package bench

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/servertest"
)

// statementLog records the SQL of every statement the server's pool sends, alone or in a batch.
type statementLog struct {
	mu  sync.Mutex
	sql []string
}

func (l *statementLog) add(sql string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sql = append(l.sql, sql)
}

func (l *statementLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.sql
	l.sql = nil
	return out
}

func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	l.add(data.SQL)
	return ctx
}
func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (l *statementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (l *statementLog) TraceBatchQuery(_ context.Context, _ *pgx.Conn, data pgx.TraceBatchQueryData) {
	l.add(data.SQL)
}
func (l *statementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

var (
	insertInto = regexp.MustCompile(`(?i)INSERT INTO (\w+) \(([^)]*)\)`)
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
	log := &statementLog{}
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
	log.take()
	create("measured")
	server := log.take()

	file, err := os.ReadFile("sql/create_statements.sql")
	if err != nil {
		t.Fatal(err)
	}
	var copied []string
	var cur strings.Builder
	for line := range strings.SplitSeq(string(file), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") || strings.HasPrefix(line, `\`) {
			continue
		}
		cur.WriteString(line + "\n")
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			copied = append(copied, cur.String())
			cur.Reset()
		}
	}
	if got, want := shape(copied), shape(server); !slices.Equal(got, want) {
		t.Errorf("bench/sql/create_statements.sql no longer sends what the server sends for a create:\ncopy:   %q\nserver: %q\nthe server's statements:\n%s",
			got, want, strings.Join(server, "\n---\n"))
	}
}
