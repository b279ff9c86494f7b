package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
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
	_, err := domain.PurgeExpiredIdempotencyKeys(ctx, w.pool)
	return err
}

// SignInRetentionArgs is the periodic job that deletes ended sign-in flows and sessions.
type SignInRetentionArgs struct{}

// Kind implements river.JobArgs.
func (SignInRetentionArgs) Kind() string { return "signin_retention" }

type signInRetentionWorker struct {
	river.WorkerDefaults[SignInRetentionArgs]
	pool *pgxpool.Pool
}

func (w *signInRetentionWorker) Work(ctx context.Context, _ *river.Job[SignInRetentionArgs]) error {
	_, _, err := domain.PurgeEndedSignIns(ctx, w.pool)
	return err
}

// MailArgs is the job that delivers one queued mail.
type MailArgs struct {
	MailID string `json:"mail_id"`
}

// Kind implements river.JobArgs.
func (MailArgs) Kind() string { return "mail" }

type mailWorker struct {
	river.WorkerDefaults[MailArgs]
	pool *pgxpool.Pool
	cfg  Config
	log  *slog.Logger
}

func (w *mailWorker) Work(ctx context.Context, job *river.Job[MailArgs]) error {
	m, err := domain.GetMail(ctx, w.pool, job.Args.MailID)
	if errors.Is(err, db.ErrNotFound) || (err == nil && m.SentAt != nil) {
		return nil // gone with its organization, or already sent by an earlier attempt
	}
	if err != nil {
		return err
	}
	if err := deliver(w.cfg, w.log, m); err != nil {
		if job.Attempt >= job.MaxAttempts {
			// The last attempt: the mail will never go, and its body (a secret) must not stay.
			w.log.Error("mail abandoned after its last attempt", "mail_id", m.ID, "to", m.Recipient, "error", err)
			return errors.Join(err, domain.AbandonMail(ctx, w.pool, m.ID))
		}
		return err
	}
	return domain.MarkMailSent(ctx, w.pool, m.ID)
}

// PurgeArgs is the periodic job that purges organizations whose deletion deadline passed.
type PurgeArgs struct{}

// Kind implements river.JobArgs.
func (PurgeArgs) Kind() string { return "organization_purge" }

type purgeWorker struct {
	river.WorkerDefaults[PurgeArgs]
	pool *pgxpool.Pool
	log  *slog.Logger
}

func (w *purgeWorker) Work(ctx context.Context, _ *river.Job[PurgeArgs]) error {
	_, err := PurgeDue(ctx, w.pool, w.log)
	return err
}

// PurgeDue finishes purges a crash interrupted, then purges every organization whose deadline
// has passed; it returns how many it purged. Any number of workers may run it at once.
func PurgeDue(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) (int, error) {
	n := 0
	stuck, err := domain.PurgingOrganizations(ctx, pool)
	if err != nil {
		return n, err
	}
	for {
		var o domain.Organization
		if len(stuck) > 0 {
			o, stuck = stuck[0], stuck[1:]
		} else {
			var found bool
			if o, found, err = domain.StartDuePurge(ctx, pool); err != nil || !found {
				return n, err
			}
		}
		start := time.Now()
		removed, err := domain.PurgeOrganization(ctx, pool, o)
		if err != nil {
			return n, fmt.Errorf("purge %s: %w", o.ID, err)
		}
		if removed { // another worker may have finished the same purge
			log.Info("organization purged", "organization_id", o.ID, "duration", time.Since(start))
			n++
		}
	}
}

// UsageRetentionArgs is the periodic job that deletes usage older than 400 days.
type UsageRetentionArgs struct{}

// Kind implements river.JobArgs.
func (UsageRetentionArgs) Kind() string { return "usage_retention" }

type usageRetentionWorker struct {
	river.WorkerDefaults[UsageRetentionArgs]
	pool *pgxpool.Pool
}

func (w *usageRetentionWorker) Work(ctx context.Context, _ *river.Job[UsageRetentionArgs]) error {
	_, err := domain.PurgeOldUsage(ctx, w.pool, time.Now())
	return err
}

// ObservationRetentionArgs is the periodic job that deletes observations older than each
// organization's observation_retention_days, and forgotten batch IDs.
type ObservationRetentionArgs struct{}

// Kind implements river.JobArgs.
func (ObservationRetentionArgs) Kind() string { return "observation_retention" }

type observationRetentionWorker struct {
	river.WorkerDefaults[ObservationRetentionArgs]
	pool     *pgxpool.Pool
	defaults domain.PolicyDocument
}

func (w *observationRetentionWorker) Work(ctx context.Context, _ *river.Job[ObservationRetentionArgs]) error {
	_, err := domain.PurgeOldObservations(ctx, w.pool, w.defaults, time.Now())
	return err
}

// ExportArgs is the job that writes one export's archive.
type ExportArgs struct {
	TransferID string `json:"transfer_id"`
}

// Kind implements river.JobArgs.
func (ExportArgs) Kind() string { return "transfer_export" }

// InsertOpts implements river.JobArgsWithInsertOpts: an export that fails is marked failed and
// not retried (the operator starts a new one); an attempt a crash interrupted runs again.
func (ExportArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 3} }

type exportWorker struct {
	river.WorkerDefaults[ExportArgs]
	pool *pgxpool.Pool
	cfg  Config
	log  *slog.Logger
}

func (w *exportWorker) Work(ctx context.Context, job *river.Job[ExportArgs]) error {
	return RunExport(ctx, w.pool, w.cfg, w.log, job.Args.TransferID)
}

// RunExport works one export now, as its job does (a release command that waits for its export
// calls it instead of waiting for a server process; the queued job then finds it done). A
// failed export is marked failed and logged, not retried.
func RunExport(ctx context.Context, pool *pgxpool.Pool, cfg Config, log *slog.Logger, transferID string) error {
	start := time.Now()
	ran, err := domain.WorkExport(ctx, pool, transferID, domain.ArchiveSource{DeploymentID: cfg.DeploymentID, PublicURL: cfg.PublicURL})
	switch {
	case err != nil:
		log.Error("export failed", "transfer_id", transferID, "error", err)
	case ran:
		log.Info("export finished", "transfer_id", transferID, "duration", time.Since(start))
	}
	return nil
}

// newJobClient builds the River client with the deployment's workers and periodic jobs. It
// inserts jobs (in the transactions that cause them) from the start; it works them once
// started (Run, or a test).
func newJobClient(pool *pgxpool.Pool, cfg Config, log *slog.Logger) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &idempotencyRetentionWorker{pool: pool})
	river.AddWorker(workers, &mailWorker{pool: pool, cfg: cfg, log: log})
	river.AddWorker(workers, &purgeWorker{pool: pool, log: log})
	river.AddWorker(workers, &usageRetentionWorker{pool: pool})
	river.AddWorker(workers, &observationRetentionWorker{pool: pool, defaults: cfg.PolicyDefaults})
	river.AddWorker(workers, &signInRetentionWorker{pool: pool})
	river.AddWorker(workers, &exportWorker{pool: pool, cfg: cfg, log: log})
	periodic := func(every time.Duration, args river.JobArgs) *river.PeriodicJob {
		return river.NewPeriodicJob(river.PeriodicInterval(every),
			func() (river.JobArgs, *river.InsertOpts) { return args, nil },
			&river.PeriodicJobOpts{RunOnStart: true})
	}
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
		// River reports routine progress at info level; the deployment's log keeps its warnings.
		Logger:  slog.New(levelFloor{log.Handler(), slog.LevelWarn}),
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers: workers,
		PeriodicJobs: []*river.PeriodicJob{
			periodic(time.Hour, IdempotencyRetentionArgs{}),
			periodic(time.Hour, UsageRetentionArgs{}),
			periodic(time.Hour, ObservationRetentionArgs{}),
			periodic(time.Hour, SignInRetentionArgs{}),
			periodic(cfg.PurgeInterval, PurgeArgs{}),
		},
		FetchCooldown:     50 * time.Millisecond,
		FetchPollInterval: time.Second,
	})
}

// StartJobs starts working jobs; StopJobs (or the context) stops it.
func (s *Server) StartJobs(ctx context.Context) error { return s.jobs.Start(ctx) }

// StopJobs stops working jobs, letting running ones finish.
func (s *Server) StopJobs(ctx context.Context) error { return s.jobs.Stop(ctx) }

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
