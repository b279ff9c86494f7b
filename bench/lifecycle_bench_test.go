package bench

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// BenchmarkPurge purges an organization with 100k Activity rows and 1k owners (each with an API
// key); it reports the purge's wall time and its longest single transaction.
func BenchmarkPurge(b *testing.B) {
	env := servertest.Start(b, func(c *server.Config) { c.DeletionGracePeriod = 0 })
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		o, err := domain.CreateOrganization(ctx, env.Pool, fmt.Sprintf("purge-%d", i), "Purge me")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := env.Pool.Exec(ctx, `
			WITH u AS (INSERT INTO users (id, email, display_name)
				SELECT 'usr_' || lpad(g::text, 26, '0') || $2, 'u' || g || '-' || $2 || '@example.com', 'User ' || g
				FROM generate_series(1, 1000) g RETURNING id),
			m AS (INSERT INTO memberships (organization_id, user_id, role) SELECT $1, id, 'owner' FROM u RETURNING user_id)
			INSERT INTO user_api_keys (id, organization_id, user_id, key_hash)
				SELECT 'key_' || md5(user_id), $1, user_id, sha256(convert_to(user_id, 'UTF8')) FROM m`, o.ID, fmt.Sprint(i)); err != nil {
			b.Fatal(err)
		}
		if _, err := env.Pool.Exec(ctx, `INSERT INTO organization_activity (id, organization_id, time, request_id, actor_type,
				actor_id, actor_name, operation, changed_fields)
			SELECT 'act_' || lpad(g::text, 26, '0') || $2, $1, now(), 'req', 'system', 'system', 'system', 'bench', '{}'
			FROM generate_series(1, 100000) g`, o.ID, fmt.Sprint(i)); err != nil {
			b.Fatal(err)
		}
		if _, _, err := domain.ScheduleDeletion(ctx, env.Pool, o.ID, 0); err != nil {
			b.Fatal(err)
		}
		// Watch for long locks: a reader of another organization's row while the purge runs.
		other, _ := domain.CreateOrganization(ctx, env.Pool, fmt.Sprintf("other-%d", i), "Other")
		var longest atomic.Int64
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				t0 := time.Now()
				if _, _, err := domain.SuspendOrganization(ctx, env.Pool, other.ID, "probe"); err != nil {
					return
				}
				if d := time.Since(t0).Microseconds(); d > longest.Load() {
					longest.Store(d)
				}
				_, _, _ = domain.ResumeOrganization(ctx, env.Pool, other.ID)
			}
		}()
		b.StartTimer()
		t0 := time.Now()
		n, err := server.PurgeDue(ctx, env.Pool, slog.New(slog.DiscardHandler))
		elapsed := time.Since(t0)
		b.StopTimer()
		close(stop)
		<-done
		if err != nil || n != 1 {
			b.Fatalf("purged %d (%v)", n, err)
		}
		var left int
		if err := env.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM organization_activity WHERE organization_id = $1) +
			(SELECT count(*) FROM memberships WHERE organization_id = $1) + (SELECT count(*) FROM user_api_keys WHERE organization_id = $1)`,
			o.ID).Scan(&left); err != nil || left != 0 {
			b.Fatalf("%d rows of the purged organization left (%v)", left, err)
		}
		b.ReportMetric(elapsed.Seconds(), "purge-s")
		b.ReportMetric(float64(longest.Load())/1000, "max-other-write-ms")
		b.StartTimer()
	}
}

// BenchmarkPurgeObservations purges an organization with 20k observation batches (and their
// observations) on a deployment holding 1M batches of another organization, the two written
// interleaved, as agents of many organizations sending at once lay them out in the table: the
// purge's wall time, which must grow with the purged organization's rows, not with the
// deployment's. (A search of observation_batches by organization_id alone, which no index
// covers, reads the table from its start once per purge batch of 5000 rows, further each time.
// Written one organization after the other instead, the purged
// rows sit together and such a search finds them in the first pages it reads, which hides it.)
func BenchmarkPurgeObservations(b *testing.B) {
	env := servertest.Start(b, func(c *server.Config) { c.DeletionGracePeriod = 0 })
	ctx := context.Background()
	const otherBatches, purgedBatches = 1_000_000, 20_000
	exec := func(sql string, args ...any) {
		b.Helper()
		if _, err := env.Pool.Exec(ctx, sql, args...); err != nil {
			b.Fatal(err)
		}
	}
	install := func(orgID, installationID string) {
		exec(`INSERT INTO installations (id, organization_id, public_key, hostname, os)
			VALUES ($1, $2, sha256(convert_to($1, 'UTF8')), 'host', 'linux')`, installationID, orgID)
	}
	other, err := domain.CreateOrganization(ctx, env.Pool, "other", "Other")
	if err != nil {
		b.Fatal(err)
	}
	install(other.ID, "ins_other")
	// One organization to purge per iteration, its batches every n-th row among the other's.
	purged := make([]string, b.N)
	for i := range purged {
		o, err := domain.CreateOrganization(ctx, env.Pool, fmt.Sprintf("purge-%d", i), "Purge me")
		if err != nil {
			b.Fatal(err)
		}
		purged[i] = o.ID
		install(o.ID, fmt.Sprintf("ins_purge_%d", i))
		exec(`INSERT INTO observations (organization_id, installation_id, batch_id, observed_at, kind, data)
			SELECT $1, $2, 'b-' || g, now(), 'host.facts', '{}' FROM generate_series(1, $3::int) g`,
			o.ID, fmt.Sprintf("ins_purge_%d", i), purgedBatches)
	}
	every := (otherBatches + purgedBatches*b.N) / (purgedBatches * b.N) // 1 in every rows is a purged one
	exec(`INSERT INTO observation_batches (installation_id, batch_id, organization_id)
		SELECT CASE WHEN purged THEN 'ins_purge_' || (g / $2::int - 1) % $3::int ELSE 'ins_other' END, 'b-' || g,
			CASE WHEN purged THEN ($4::text[])[(g / $2::int - 1) % $3::int + 1] ELSE $1 END
		FROM generate_series(1, $5::int) g, LATERAL (SELECT g % $2::int = 0 AND g / $2::int <= $3::int * $6::int) p (purged)`,
		other.ID, every, b.N, purged, otherBatches+purgedBatches*b.N, purgedBatches)
	exec(`VACUUM ANALYZE observation_batches`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if _, _, err := domain.ScheduleDeletion(ctx, env.Pool, purged[i], 0); err != nil {
			b.Fatal(err)
		}
		var before int
		if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM observation_batches WHERE organization_id = $1`, purged[i]).Scan(&before); err != nil || before != purgedBatches {
			b.Fatalf("%d batches to purge, want %d (%v)", before, purgedBatches, err)
		}
		b.StartTimer()
		t0 := time.Now()
		n, err := server.PurgeDue(ctx, env.Pool, slog.New(slog.DiscardHandler))
		elapsed := time.Since(t0)
		b.StopTimer()
		if err != nil || n != 1 {
			b.Fatalf("purged %d (%v)", n, err)
		}
		var left, kept int
		if err := env.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM observation_batches WHERE organization_id = $1) +
			(SELECT count(*) FROM observations WHERE organization_id = $1),
			(SELECT count(*) FROM observation_batches WHERE organization_id = $2)`, purged[i], other.ID).Scan(&left, &kept); err != nil || left != 0 || kept != otherBatches {
			b.Fatalf("%d rows of the purged organization left, %d of the other's kept (%v)", left, kept, err)
		}
		b.ReportMetric(elapsed.Seconds(), "purge-s")
		b.StartTimer()
	}
}

// BenchmarkCountUsage counts distinct events of one organization and day from parallel
// callers, each in its own transaction: the cost per event and the contention on the counters.
func BenchmarkCountUsage(b *testing.B) {
	env := servertest.Start(b)
	ctx := context.Background()
	o, err := domain.CreateOrganization(ctx, env.Pool, "usage", "Usage")
	if err != nil {
		b.Fatal(err)
	}
	var n atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("evt-%d", n.Add(1))
			if _, err := domain.CountUsage(ctx, env.Pool, o.ID, id, time.Now(), domain.UsageDelta{IntakeRequests: 1, IntakeBytes: 1024}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}
