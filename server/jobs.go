package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"renga.dev/renga/server/db"
)

// IdempotencyRetentionArgs is the periodic job that forgets expired idempotency records.
type IdempotencyRetentionArgs struct{}

// Kind implements river.JobArgs.
func (IdempotencyRetentionArgs) Kind() string { return "idempotency_retention" }

type idempotencyRetentionWorker struct {
	river.WorkerDefaults[IdempotencyRetentionArgs]
	pool *pgxpool.Pool
}

func (w *idempotencyRetentionWorker) Work(ctx context.Context, _ *river.Job[IdempotencyRetentionArgs]) error {
	_, err := PurgeExpiredIdempotencyKeys(ctx, w.pool)
	return err
}

// PurgeExpiredIdempotencyKeys deletes expired idempotency records in small batches, so it never
// holds long locks; it returns how many it removed.
func PurgeExpiredIdempotencyKeys(ctx context.Context, q db.DBTX) (int64, error) {
	var total int64
	for {
		tag, err := q.Exec(ctx, `DELETE FROM idempotency_keys WHERE ctid = ANY (ARRAY(
			SELECT ctid FROM idempotency_keys WHERE expires_at <= now() LIMIT 1000))`)
		if err != nil {
			return total, fmt.Errorf("purge expired idempotency keys: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < 1000 {
			return total, nil
		}
	}
}

// NewJobClient builds the River client with the deployment's workers and periodic jobs.
func NewJobClient(pool *pgxpool.Pool, log *slog.Logger) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &idempotencyRetentionWorker{pool: pool})
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
		// River reports routine progress at info level; the deployment's log keeps its warnings.
		Logger:  slog.New(levelFloor{log.Handler(), slog.LevelWarn}),
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers: workers,
		PeriodicJobs: []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(time.Hour),
				func() (river.JobArgs, *river.InsertOpts) { return IdempotencyRetentionArgs{}, nil },
				&river.PeriodicJobOpts{RunOnStart: true}),
		},
	})
}

// levelFloor drops records below min.
type levelFloor struct {
	slog.Handler
	min slog.Level
}

func (h levelFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h levelFloor) WithAttrs(a []slog.Attr) slog.Handler {
	return levelFloor{h.Handler.WithAttrs(a), h.min}
}
func (h levelFloor) WithGroup(n string) slog.Handler {
	return levelFloor{h.Handler.WithGroup(n), h.min}
}
