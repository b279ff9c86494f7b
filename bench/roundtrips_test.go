package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/servertest"
)

// TestCreateRoundTrips: a keyed create's statements (bench/sql/create_statements.sql, the copy
// TestCreateStatementsFollowTheServer holds to the server's) sent from Go with pgx, one client,
// as the server sends them (one pipelined round trip, one implicit transaction:
// x-renga-one-round-trip) and as it sent them before (two: BEGIN, the credential's re-check, the
// key's lock and stored result; then the writes and COMMIT), in alternating blocks, in this
// process. No HTTP: what the round trip fewer wins a lone client's create, Go's wake-ups
// included (pgbench, in C, shows none: bench/statement.sh). Run
// with RENGA_ROUNDTRIP_BENCH=1 (RENGA_ROUNDTRIP_SECONDS per way, 10 by default); the process's
// GOMAXPROCS applies.
func TestCreateRoundTrips(t *testing.T) {
	if os.Getenv("RENGA_ROUNDTRIP_BENCH") == "" {
		t.Skip("load script: set RENGA_ROUNDTRIP_BENCH=1")
	}
	seconds := 10
	if n, err := strconv.Atoi(os.Getenv("RENGA_ROUNDTRIP_SECONDS")); err == nil && n > 0 {
		seconds = n
	}
	trips := scriptRoundTrips(t, "sql/create_statements.sql")
	if len(trips) != 1 || len(trips[0]) < 5 {
		t.Fatalf("sql/create_statements.sql has %d round trips, want the server's one, its four checks first", len(trips))
	}
	for _, trip := range trips {
		for i, s := range trip {
			trip[i] = strings.ReplaceAll(s, ":k", "$1") // pgbench's variable, as pgx's parameter
		}
	}
	env := servertest.Start(t)
	ctx := context.Background()
	if _, err := env.Pool.Exec(ctx, `INSERT INTO operator_tokens (id, name, token_hash, scopes)
		VALUES ('tok_1', 'bench', sha256('tok_1'), '{organizations:write}')`); err != nil {
		t.Fatal(err)
	}
	send := func(k string, trips ...[]string) error {
		conn, err := env.Pool.Acquire(ctx)
		if err != nil {
			return err
		}
		defer conn.Release()
		for _, trip := range trips {
			b := &pgx.Batch{}
			for _, s := range trip {
				if strings.Contains(s, "$1") {
					b.Queue(s, k)
				} else {
					b.Queue(s)
				}
			}
			if err := conn.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
		}
		return nil
	}
	ways := []struct {
		name  string
		trips [][]string
	}{
		{"one round trip (the server's)", trips},
		// As the server sent a create before x-renga-one-round-trip: BEGIN and the checks, then
		// the rest and COMMIT.
		{"two round trips", [][]string{append([]string{"BEGIN"}, trips[0][:4]...), append(slices.Clone(trips[0][4:]), "COMMIT")}},
	}
	lat := make([][]time.Duration, len(ways))
	deadline := time.Now().Add(time.Duration(2*seconds) * time.Second)
	for time.Now().Before(deadline) {
		for i, w := range ways {
			for range 200 {
				k := strconv.FormatInt(rand.Int64(), 10)
				start := time.Now()
				if err := send(k, w.trips...); err != nil {
					t.Fatal(err)
				}
				lat[i] = append(lat[i], time.Since(start))
			}
		}
	}
	for i, w := range ways {
		slices.Sort(lat[i])
		l := lat[i]
		fmt.Printf("create-round-trips %-31s p50=%.3fms p90=%.3fms n=%d\n", w.name,
			ms(l[len(l)/2]), ms(l[len(l)*9/10]), len(l))
	}
}
