package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Run serves until ctx is cancelled, then shuts down gracefully: it stops accepting, lets
// in-flight requests finish (up to 20 s), then stops the job workers.
func Run(ctx context.Context, cfg Config, pool *pgxpool.Pool, log *slog.Logger, ln net.Listener) error {
	s, err := New(cfg, pool, log)
	if err != nil {
		return err
	}
	if err := s.StartJobs(ctx); err != nil {
		return fmt.Errorf("start job workers: %w", err)
	}
	timeouts := cfg.HTTP
	if timeouts == (HTTPTimeouts{}) {
		timeouts = DefaultHTTPTimeouts
	}
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: timeouts.Header,
		ReadTimeout:       timeouts.Read,
		WriteTimeout:      timeouts.Write,
		IdleTimeout:       timeouts.Idle,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() {
		if cfg.TLSCertFile != "" {
			errc <- srv.ServeTLS(ln, cfg.TLSCertFile, cfg.TLSKeyFile)
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	log.Info("serving", "address", ln.Addr().String(), "public_url", cfg.PublicURL, "environment", cfg.Environment,
		"deployment_id", cfg.DeploymentID, "tls", cfg.TLSCertFile != "")
	select {
	case err := <-errc:
		stopCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		return errors.Join(err, s.StopJobs(stopCtx))
	case <-ctx.Done():
	}
	log.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	if jerr := s.StopJobs(shutdownCtx); jerr != nil {
		err = errors.Join(err, jerr)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
