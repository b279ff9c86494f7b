package db

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"renga.dev/renga/migrations"
)

// MigrationStatus says whether the schema is current.
type MigrationStatus struct {
	Version int64 `json:"version"`
	Pending int   `json:"pending"`
}

func provider(pool *pgxpool.Pool) (*goose.Provider, func() error, error) {
	sqlDB := stdlib.OpenDBFromPool(pool)
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
	if err != nil {
		_ = sqlDB.Close()
		return nil, nil, fmt.Errorf("load migrations: %w", err)
	}
	return p, sqlDB.Close, nil
}

// Migrate applies the project's migrations, then River's own.
func Migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	p, closeDB, err := provider(pool)
	if err != nil {
		return err
	}
	defer func() { _ = closeDB() }()
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	for _, r := range results {
		log.Info("migration applied", "version", r.Source.Version, "file", r.Source.Path, "duration", r.Duration)
	}
	rm, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("job queue migrations: %w", err)
	}
	if _, err := rm.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("apply job queue migrations: %w", err)
	}
	return nil
}

// Status reports the applied version and how many migrations are pending (the project's and
// River's).
func Status(ctx context.Context, pool *pgxpool.Pool) (MigrationStatus, error) {
	p, closeDB, err := provider(pool)
	if err != nil {
		return MigrationStatus{}, err
	}
	defer func() { _ = closeDB() }()
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return MigrationStatus{}, fmt.Errorf("read schema version: %w", err)
	}
	st, err := p.Status(ctx)
	if err != nil {
		return MigrationStatus{}, fmt.Errorf("read migration status: %w", err)
	}
	pending := 0
	for _, s := range st {
		if s.State == goose.StatePending {
			pending++
		}
	}
	rm, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return MigrationStatus{}, err
	}
	res, err := rm.Validate(ctx, nil)
	if err != nil {
		return MigrationStatus{}, fmt.Errorf("read job queue migration status: %w", err)
	}
	if !res.OK {
		pending += len(res.Messages)
		if len(res.Messages) == 0 {
			pending++
		}
	}
	return MigrationStatus{Version: v, Pending: pending}, nil
}
