package apitest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// usageDayJSON is one daily row of GET .../usage.
type usageDayJSON struct {
	Day             string `json:"day"`
	IntakeRequests  int64  `json:"intake_requests"`
	IntakeBytes     int64  `json:"intake_bytes"`
	JobsCreated     int64  `json:"jobs_created"`
	TerminalMinutes int64  `json:"terminal_minutes"`
}

// usageTotalJSON is one organization's totals in GET /usage.
type usageTotalJSON struct {
	OrganizationID  string `json:"organization_id"`
	IntakeRequests  int64  `json:"intake_requests"`
	IntakeBytes     int64  `json:"intake_bytes"`
	JobsCreated     int64  `json:"jobs_created"`
	TerminalMinutes int64  `json:"terminal_minutes"`
}

func day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// orgUsage reads GET /organizations/{id}/usage?from=&to=.
func orgUsage(t testing.TB, env *servertest.Env, token, orgID, from, to string) []usageDayJSON {
	t.Helper()
	rep := send(t, env, req{Method: http.MethodGet, Path: orgPath(orgID) + "/usage?from=" + from + "&to=" + to, Token: token})
	if rep.Status != http.StatusOK {
		t.Fatalf("usage %s..%s: %d %s", from, to, rep.Status, rep.Body)
	}
	var u struct {
		OrganizationID string         `json:"organization_id"`
		Days           []usageDayJSON `json:"days"`
	}
	rep.decode(t, &u)
	if u.OrganizationID != orgID {
		t.Errorf("usage organization_id = %q", u.OrganizationID)
	}
	return u.Days
}

// storedUsage sums the stored counters of an organization's day (all shards).
func storedUsage(t testing.TB, env *servertest.Env, orgID, d string) (requests, bytes, jobs, seconds int64) {
	t.Helper()
	err := env.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(intake_requests), 0)::bigint, coalesce(sum(intake_bytes), 0)::bigint,
		coalesce(sum(jobs_created), 0)::bigint, coalesce(sum(terminal_seconds), 0)::bigint
		FROM usage_counters WHERE organization_id = $1 AND day = $2::date`, orgID, d).Scan(&requests, &bytes, &jobs, &seconds)
	if err != nil {
		t.Fatal(err)
	}
	return
}

// TestUsageCountedOnce: the same event counted twice (a retry), or ten times at once, counts
// once; an event whose transaction rolls back is not counted, and its retry is.
func TestUsageCountedOnce(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := context.Background()
	o, err := domain.CreateOrganization(ctx, env.Pool, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	delta := domain.UsageDelta{IntakeRequests: 1, IntakeBytes: 1000}

	for i, want := range []bool{true, false} {
		counted, err := domain.CountUsage(ctx, env.Pool, o.ID, "batch-1", now, delta)
		if err != nil || counted != want {
			t.Errorf("CountUsage #%d of one event = %v, %v; want %v", i+1, counted, err, want)
		}
	}

	var wg sync.WaitGroup
	results := make([]bool, 10)
	errs := make([]error, 10)
	gate := make(chan struct{})
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			results[i], errs[i] = domain.CountUsage(ctx, env.Pool, o.ID, "batch-2", now, domain.UsageDelta{IntakeRequests: 1, IntakeBytes: 500, JobsCreated: 1})
		}()
	}
	close(gate)
	wg.Wait()
	winners := 0
	for i := range results {
		if errs[i] != nil {
			t.Errorf("concurrent CountUsage: %v", errs[i])
		}
		if results[i] {
			winners++
		}
	}
	if winners != 1 {
		t.Errorf("%d of 10 concurrent counts of one event reported counting it, want 1", winners)
	}

	// Counted in a transaction that rolls back: not counted; the retry counts.
	tx, err := env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if counted, err := domain.CountUsage(ctx, tx, o.ID, "batch-3", now, domain.UsageDelta{IntakeRequests: 1, IntakeBytes: 7}); err != nil || !counted {
		t.Fatalf("CountUsage in a transaction: %v, %v", counted, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if counted, err := domain.CountUsage(ctx, env.Pool, o.ID, "batch-3", now, domain.UsageDelta{IntakeRequests: 1, IntakeBytes: 7}); err != nil || !counted {
		t.Errorf("retry of a rolled-back event: %v, %v; want counted", counted, err)
	}
	// Event IDs are per organization: another organization's event with the same ID counts.
	other, err := domain.CreateOrganization(ctx, env.Pool, "globex", "Globex")
	if err != nil {
		t.Fatal(err)
	}
	if counted, err := domain.CountUsage(ctx, env.Pool, other.ID, "batch-1", now, delta); err != nil || !counted {
		t.Errorf("another organization's event with the same ID: %v, %v", counted, err)
	}

	requests, bytes, jobs, _ := storedUsage(t, env, o.ID, day(now))
	if requests != 3 || bytes != 1507 || jobs != 1 {
		t.Errorf("stored usage = %d requests, %d bytes, %d jobs; want 3, 1507, 1", requests, bytes, jobs)
	}
	_, op := scopedToken(t, env, "usage:read")
	days := orgUsage(t, env, op, o.ID, day(now), day(now))
	if len(days) != 1 || days[0].IntakeRequests != 3 || days[0].IntakeBytes != 1507 || days[0].JobsCreated != 1 {
		t.Errorf("usage = %+v", days)
	}

	// Many events of a day share a few counter rows (shards 0 to 7): the table grows with days,
	// not with events. Fails when: the event's shard is its hash times the shard count instead of
	// modulo it (usage.go, usageShard), which keeps every total right.
	busy, err := domain.CreateOrganization(ctx, env.Pool, "initech", "Initech")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 64 {
		if _, err := domain.CountUsage(ctx, env.Pool, busy.ID, fmt.Sprintf("batch-%d", i), now, delta); err != nil {
			t.Fatal(err)
		}
	}
	var rows, low, high int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*), min(shard), max(shard) FROM usage_counters WHERE organization_id = $1`,
		busy.ID).Scan(&rows, &low, &high); err != nil {
		t.Fatal(err)
	}
	if rows > 8 || low < 0 || high > 7 {
		t.Errorf("64 events of one day in %d counter rows, shards %d to %d; want at most 8 rows, shards 0 to 7", rows, low, high)
	}
}

// TestUsageDaysAndTotals: days are UTC days; the daily view has one row per day with zeros;
// terminal seconds are rounded up to minutes only in the response; GET /usage gives totals per
// organization; ranges are checked.
func TestUsageDaysAndTotals(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := context.Background()
	_, op := scopedToken(t, env, "usage:read")
	acme, err := domain.CreateOrganization(ctx, env.Pool, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	globex, err := domain.CreateOrganization(ctx, env.Pool, "globex", "Globex")
	if err != nil {
		t.Fatal(err)
	}
	idle, err := domain.CreateOrganization(ctx, env.Pool, "idle", "Idle")
	if err != nil {
		t.Fatal(err)
	}
	count := func(orgID, event string, at time.Time, d domain.UsageDelta) {
		t.Helper()
		if counted, err := domain.CountUsage(ctx, env.Pool, orgID, event, at, d); err != nil || !counted {
			t.Fatalf("CountUsage %s: %v, %v", event, counted, err)
		}
	}
	// A day ten days ago, and 23:30 on it at UTC-5: that is 04:30 the next UTC day.
	base := time.Now().UTC().AddDate(0, 0, -10)
	d0 := time.Date(base.Year(), base.Month(), base.Day(), 0, 0, 0, 0, time.UTC)
	d1, d2, d3 := d0.AddDate(0, 0, 1), d0.AddDate(0, 0, 2), d0.AddDate(0, 0, 3)
	lateEvening := time.Date(d0.Year(), d0.Month(), d0.Day(), 23, 30, 0, 0, time.FixedZone("UTC-5", -5*3600))
	count(acme.ID, "late", lateEvening, domain.UsageDelta{IntakeRequests: 1, IntakeBytes: 10})
	count(acme.ID, "term-1", d1.Add(time.Hour), domain.UsageDelta{TerminalSeconds: 61})
	count(acme.ID, "term-2", d3.Add(time.Hour), domain.UsageDelta{TerminalSeconds: 30})
	count(acme.ID, "term-3", d3.Add(2*time.Hour), domain.UsageDelta{TerminalSeconds: 30})
	count(acme.ID, "job-1", d3.Add(3*time.Hour), domain.UsageDelta{JobsCreated: 2})
	count(globex.ID, "g-1", d2.Add(time.Hour), domain.UsageDelta{IntakeRequests: 5, IntakeBytes: 5000, TerminalSeconds: 1})

	days := orgUsage(t, env, op, acme.ID, day(d0), day(d3))
	want := []usageDayJSON{
		{Day: day(d0)},
		{Day: day(d1), IntakeRequests: 1, IntakeBytes: 10, TerminalMinutes: 2},
		{Day: day(d2)},
		{Day: day(d3), JobsCreated: 2, TerminalMinutes: 1},
	}
	if len(days) != len(want) {
		t.Fatalf("usage %s..%s = %+v, want %d rows", day(d0), day(d3), days, len(want))
	}
	for i := range want {
		if days[i] != want[i] {
			t.Errorf("usage row %d = %+v, want %+v", i, days[i], want[i])
		}
	}
	// Seconds stay seconds in storage.
	if _, _, _, seconds := storedUsage(t, env, acme.ID, day(d1)); seconds != 61 {
		t.Errorf("stored terminal seconds on %s = %d, want 61", day(d1), seconds)
	}
	if _, _, _, seconds := storedUsage(t, env, acme.ID, day(d3)); seconds != 60 {
		t.Errorf("stored terminal seconds on %s = %d, want 60", day(d3), seconds)
	}
	// An organization without usage has a row of zeros per day.
	if days := orgUsage(t, env, op, idle.ID, day(d0), day(d1)); len(days) != 2 || days[0] != (usageDayJSON{Day: day(d0)}) ||
		days[1] != (usageDayJSON{Day: day(d1)}) {
		t.Errorf("usage of an idle organization = %+v", days)
	}

	// Totals per organization over a range; organizations without usage are left out.
	rep := send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/usage?from=" + day(d0) + "&to=" + day(d3), Token: op})
	if rep.Status != http.StatusOK {
		t.Fatalf("GET /usage: %d %s", rep.Status, rep.Body)
	}
	var totals struct {
		Items []usageTotalJSON `json:"items"`
	}
	rep.decode(t, &totals)
	got := map[string]usageTotalJSON{}
	for _, it := range totals.Items {
		got[it.OrganizationID] = it
	}
	if len(totals.Items) != 2 ||
		got[acme.ID] != (usageTotalJSON{OrganizationID: acme.ID, IntakeRequests: 1, IntakeBytes: 10, JobsCreated: 2, TerminalMinutes: 3}) ||
		got[globex.ID] != (usageTotalJSON{OrganizationID: globex.ID, IntakeRequests: 5, IntakeBytes: 5000, TerminalMinutes: 1}) {
		t.Errorf("GET /usage = %s", rep.Body)
	}
	// A range that excludes d1 excludes its usage.
	rep = send(t, env, req{Method: http.MethodGet, Path: "/api/v1/operator/usage?from=" + day(d2) + "&to=" + day(d2), Token: op})
	totals.Items = nil
	rep.decode(t, &totals)
	if len(totals.Items) != 1 || totals.Items[0].OrganizationID != globex.ID {
		t.Errorf("GET /usage of %s = %s", day(d2), rep.Body)
	}

	// Ranges: from after to, or more than 400 days, are refused; exactly 400 days is fine.
	from := d0.AddDate(0, 0, -300)
	for _, path := range []string{orgPath(acme.ID) + "/usage", "/api/v1/operator/usage"} {
		for _, bad := range [][2]time.Time{{d1, d0}, {from, from.AddDate(0, 0, 400)}} {
			send(t, env, req{Method: http.MethodGet, Path: path + "?from=" + day(bad[0]) + "&to=" + day(bad[1]), Token: op}).
				expectProblem(t, http.StatusBadRequest, "invalid_request")
		}
		send(t, env, req{Method: http.MethodGet, Path: path + "?from=" + day(d0), Token: op}).
			expectProblem(t, http.StatusBadRequest, "invalid_request")
		send(t, env, req{Method: http.MethodGet, Path: path + "?from=yesterday&to=" + day(d0), Token: op}).
			expectProblem(t, http.StatusBadRequest, "invalid_request")
	}
	if days := orgUsage(t, env, op, acme.ID, day(from), day(from.AddDate(0, 0, 399))); len(days) != 400 {
		t.Errorf("a 400-day range has %d rows, want 400", len(days))
	}
	rep = send(t, env, req{Method: http.MethodGet, Path: orgPath("org_00000000000000000000000000") + "/usage?from=" + day(d0) + "&to=" + day(d0), Token: op})
	rep.expectProblem(t, http.StatusNotFound, "not_found")
}

// TestUsageRetention: the retention removes daily rows older than 400 days and keeps newer
// ones, and forgets event IDs after the deduplication window.
func TestUsageRetention(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := context.Background()
	o, err := domain.CreateOrganization(ctx, env.Pool, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for _, ago := range []int{400, 401, 450, 399, 10} {
		if _, err := env.Pool.Exec(ctx, `INSERT INTO usage_counters (organization_id, day, shard, intake_requests)
			VALUES ($1, $2::date, 0, 1)`, o.ID, day(now.AddDate(0, 0, -ago))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Pool.Exec(ctx, `INSERT INTO usage_events (organization_id, event_id, recorded_at)
		VALUES ($1, 'old', $2), ($1, 'recent', now())`, o.ID, now.Add(-domain.UsageDedupWindow-time.Hour)); err != nil {
		t.Fatal(err)
	}
	removed, err := domain.PurgeOldUsage(ctx, env.Pool, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if removed != 4 {
		t.Errorf("PurgeOldUsage removed %d rows, want 4 (three days, one event)", removed)
	}
	rows, err := env.Pool.Query(ctx, `SELECT to_char(day, 'YYYY-MM-DD') FROM usage_counters WHERE organization_id = $1 ORDER BY day`, o.ID)
	if err != nil {
		t.Fatal(err)
	}
	left, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0] != day(now.AddDate(0, 0, -399)) || left[1] != day(now.AddDate(0, 0, -10)) {
		t.Errorf("days left = %v, want the ones 399 and 10 days ago", left)
	}
	if n := countRows(t, env, `SELECT count(*) FROM usage_events WHERE organization_id = $1 AND event_id = 'recent'`, o.ID); n != 1 {
		t.Errorf("the recent event ID was forgotten")
	}
	if n := countRows(t, env, `SELECT count(*) FROM usage_events WHERE organization_id = $1 AND event_id = 'old'`, o.ID); n != 0 {
		t.Errorf("the old event ID was kept")
	}
}

// TestUsageRetentionDeletesInBatches: with more old rows than one batch of 5,000 (12,000 event
// IDs past the deduplication window), one run of the retention deletes them all, in three
// passes, and keeps the recent ones.
// Fails when: the loop stops after a full batch (the mutant of its `< 5000` into `<= 5000`,
// which TestUsageRetention's handful of rows cannot tell apart): "7000 old event IDs left".
func TestUsageRetentionDeletesInBatches(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	ctx := context.Background()
	o, err := domain.CreateOrganization(ctx, env.Pool, "acme", "Acme")
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-domain.UsageDedupWindow - time.Hour)
	if _, err := env.Pool.Exec(ctx, `INSERT INTO usage_events (organization_id, event_id, recorded_at)
		SELECT $1, 'old-' || i, $2 FROM generate_series(1, 12000) i
		UNION ALL SELECT $1, 'recent-' || i, now() FROM generate_series(1, 10) i`, o.ID, old); err != nil {
		t.Fatal(err)
	}
	removed, err := domain.PurgeOldUsage(ctx, env.Pool, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if removed != 12000 {
		t.Errorf("PurgeOldUsage removed %d rows, want the 12,000 old event IDs", removed)
	}
	if n := countRows(t, env, `SELECT count(*) FROM usage_events WHERE event_id LIKE 'old-%'`); n != 0 {
		t.Errorf("%d old event IDs left", n)
	}
	if n := countRows(t, env, `SELECT count(*) FROM usage_events WHERE event_id LIKE 'recent-%'`); n != 10 {
		t.Errorf("%d recent event IDs left, want 10", n)
	}
}
