package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v5"

	"renga.dev/renga/gen/client"
)

// Options are what tests and the CLI may change beyond the configuration.
type Options struct {
	Logger *slog.Logger
	// Collect returns one observation's kind and data; nil collects host facts.
	Collect func(context.Context) (string, map[string]any, error)
	// RetryInitial and RetryMax shape the exponential back-off (with jitter) after a failure.
	RetryInitial, RetryMax time.Duration
	// RequestTimeout bounds every HTTP request.
	RequestTimeout time.Duration
	// Transport replaces the default transport (tests: a test server's TLS roots).
	Transport http.RoundTripper
}

// Agent is one running agent.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	collect  func(context.Context) (string, map[string]any, error)
	hc       *http.Client
	identity Identity
	queue    *Queue
	retry    *backoff.ExponentialBackOff

	mu           sync.Mutex // guards home, which Status (a job) reads
	home         Home
	registration Registration

	wake          chan struct{}
	lastJobsFetch time.Time
	pendingJobs   map[string]client.JobResult // results not yet reported, by job ID
}

// New prepares an agent: the state directory, the identity (created on first start), the
// queue and the persisted home. Run starts it.
func New(cfg Config, opts Options) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	if opts.Collect == nil {
		opts.Collect = HostFacts
	}
	if opts.RetryInitial == 0 {
		opts.RetryInitial = time.Second
	}
	if opts.RetryMax == 0 {
		opts.RetryMax = 5 * time.Minute
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = 30 * time.Second
	}
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return nil, &ConfigError{"state_dir", err.Error()}
	}
	a := &Agent{cfg: cfg, log: opts.Logger, collect: opts.Collect, hc: newHTTPClient(opts.RequestTimeout),
		wake: make(chan struct{}, 1), pendingJobs: map[string]client.JobResult{}}
	if opts.Transport != nil {
		a.hc.Transport = opts.Transport
	}
	a.retry = backoff.NewExponentialBackOff()
	a.retry.InitialInterval, a.retry.MaxInterval = opts.RetryInitial, opts.RetryMax
	a.retry.RandomizationFactor, a.retry.Multiplier = 0.5, 2
	id, created, err := loadOrCreateIdentity(cfg.StateDir)
	if err != nil {
		return nil, fmt.Errorf("installation identity: %w", err)
	}
	a.identity = id
	if created {
		a.log.Info("created the installation identity", "installation_id", id.InstallationID, "state_dir", cfg.StateDir)
	}
	if a.queue, err = OpenQueue(cfg.StateDir, cfg.QueueMaxBytes); err != nil {
		return nil, err
	}
	if r, err := LoadRegistration(cfg.StateDir); err == nil {
		a.registration = r
	} else if !errors.Is(err, fs.ErrNotExist) {
		_ = a.queue.Close()
		return nil, err
	}
	h, err := LoadHome(cfg.StateDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		a.log.Warn("home.json is unreadable: resolving again", "error", err.Error())
	case h.RengaURL != cfg.RengaURL:
		// The operator pointed the agent elsewhere: the old home is not this renga_url's answer.
		a.log.Info("renga_url changed since the home was resolved: resolving again", "renga_url", cfg.RengaURL, "previous_renga_url", h.RengaURL)
	default:
		a.home = h
	}
	return a, nil
}

// Close releases the queue.
func (a *Agent) Close() error { return a.queue.Close() }

// Queue is the agent's durable queue.
func (a *Agent) Queue() *Queue { return a.queue }

// InstallationID is the agent's installation ID.
func (a *Agent) InstallationID() string { return a.identity.InstallationID }

func (a *Agent) logHome(msg string) {
	a.log.Info(msg, "renga_url", a.cfg.RengaURL, "home", a.home.Home, "resolved_at", a.home.ResolvedAt,
		"installation_id", a.identity.InstallationID)
}

// Run collects every interval and sends until ctx ends. Only the state directory failing
// stops it; every answer from the network is logged and retried.
func (a *Agent) Run(ctx context.Context) error {
	a.logHome("agent starting")
	a.writeStatus()
	// The collector stops, and is waited for, before Run returns and the queue may close.
	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	var collector sync.WaitGroup
	collector.Go(func() { errc <- a.collectLoop(ctx) })
	defer func() { cancel(); collector.Wait() }()
	for {
		wait, failed, err := a.step(ctx)
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
		a.writeStatus()
		if err := a.wait(ctx, wait, failed, errc); err != nil || ctx.Err() != nil {
			return err
		}
	}
}

// wait waits d, or less: a new observation wakes the sender, but never shortens a back-off
// (after a failed step); during one it refreshes status.json, so that `renga agent status`
// shows what an outage queues as it queues it. It returns the collector's error.
func (a *Agent) wait(ctx context.Context, d time.Duration, backingOff bool, errc <-chan error) error {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return err
		case <-a.wake:
			if !backingOff {
				return nil
			}
			a.writeStatus()
		case <-t.C:
			return nil
		}
	}
}

// collectLoop queues an observation now and every interval.
func (a *Agent) collectLoop(ctx context.Context) error {
	t := time.NewTicker(a.cfg.Interval)
	defer t.Stop()
	for {
		if err := a.collectOnce(ctx); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// collectOnce queues one observation; only a failing queue is an error.
func (a *Agent) collectOnce(ctx context.Context) error {
	kind, data, err := a.collect(ctx)
	if err != nil {
		a.log.Warn("collection failed", "error", err.Error())
		return nil
	}
	seq, dropped, err := a.queue.Add(kind, time.Now(), data)
	if err != nil {
		return fmt.Errorf("queue an observation: %w", err)
	}
	if dropped > 0 {
		st, _ := a.queue.Stats()
		a.log.Warn("queue full: dropped the oldest observations", "dropped", dropped, "dropped_total", st.Dropped,
			"queue_max_bytes", a.cfg.QueueMaxBytes)
	}
	a.log.Debug("queued an observation", "sequence", seq, "kind", kind)
	select {
	case a.wake <- struct{}{}:
	default:
	}
	return nil
}

// step does what the agent can now (resolve, register, send, jobs) and says how long to wait
// before the next step, and whether that wait is a back-off after a failure.
func (a *Agent) step(ctx context.Context) (time.Duration, bool, error) {
	err := a.work(ctx)
	if err == nil {
		a.retry.Reset()
		return a.cfg.Interval, false, nil
	}
	if ctx.Err() != nil {
		return 0, false, nil
	}
	var fatal *stateError
	if errors.As(err, &fatal) {
		return 0, true, fatal.err
	}
	if he, ok := asHomeError(err); ok && he.Moved() {
		wait := a.moved(ctx)
		return wait, wait > 0, nil
	}
	wait := a.retry.NextBackOff()
	if he, ok := asHomeError(err); ok && he.RetryAfter > wait {
		wait = he.RetryAfter
	}
	a.logFailure(err, wait)
	return wait, true, nil
}

// stateError is a failure of the state directory: the agent stops rather than lose data.
type stateError struct{ err error }

func (e *stateError) Error() string { return e.err.Error() }

func (a *Agent) logFailure(err error, wait time.Duration) {
	attrs := []any{"error", err.Error(), "retry_in", wait.Round(time.Millisecond).String(), "home", a.home.Home}
	if he, ok := asHomeError(err); ok {
		attrs = append(attrs, "status", he.Status)
		if he.Code != "" {
			attrs = append(attrs, "code", he.Code)
		}
		switch {
		case he.Status >= 300 && he.Status < 400:
			a.log.Error("redirect not followed", attrs...)
		case he.Status == http.StatusUnauthorized:
			// A signature older or newer than 5 minutes by the home's clock is also a 401.
			attrs = append(attrs, "hint", "check the intake key, that the installation exists at this home, and the host's clock")
			a.log.Error("the home refused this agent's credentials (not re-resolving)", attrs...)
		case he.Status == http.StatusForbidden:
			a.log.Error("the home refused the request (not re-resolving)", attrs...)
		case he.Status == http.StatusServiceUnavailable && he.Code == "moving":
			// An export for a move froze the organization's agent writes: the queue keeps
			// everything until the home answers 410 moved (or the move is abandoned).
			a.log.Warn("the organization is being moved: keeping the queue and retrying", attrs...)
		default:
			a.log.Warn("request failed", attrs...)
		}
		return
	}
	var ke *keyIssuerError
	if errors.As(err, &ke) {
		a.log.Error("the intake key is not sent to this home", attrs...)
		return
	}
	a.log.Warn("request failed", attrs...)
}

// moved handles 410 moved: discard the home and resolve again. The same home back is
// transient (back off, keep the queue); a different home is where the agent continues.
func (a *Agent) moved(ctx context.Context) time.Duration {
	previous := a.home.Home
	a.log.Warn("the home answered 410 moved: resolving again", "home", previous, "renga_url", a.cfg.RengaURL)
	if err := a.setHome(Home{}); err != nil {
		return a.retry.NextBackOff()
	}
	if err := a.resolve(ctx); err != nil {
		wait := a.retry.NextBackOff()
		a.logFailure(err, wait)
		return wait
	}
	if a.home.Home == previous {
		wait := a.retry.NextBackOff()
		a.log.Warn("renga_url still answers the moved home: backing off", "home", previous, "retry_in", wait.Round(time.Millisecond).String())
		return wait
	}
	a.retry.Reset()
	return 0
}

func (a *Agent) setHome(h Home) error {
	var err error
	if h.Home == "" {
		err = discardHome(a.cfg.StateDir)
	} else {
		err = saveHome(a.cfg.StateDir, h)
	}
	if err != nil {
		a.log.Error("cannot write home.json", "error", err.Error())
		return err
	}
	a.mu.Lock()
	a.home = h
	a.mu.Unlock()
	return nil
}

// resolve asks renga_url for the home and persists it.
func (a *Agent) resolve(ctx context.Context) error {
	home, err := resolveHome(ctx, a.hc, a.cfg)
	if err != nil {
		return err
	}
	if err := a.setHome(Home{RengaURL: a.cfg.RengaURL, Home: home, ResolvedAt: time.Now().UTC()}); err != nil {
		return &stateError{err}
	}
	a.logHome("resolved the home")
	return nil
}

// work resolves the home when none is persisted (or home.json was deleted), registers once,
// sends every batch, and fetches and reports jobs.
func (a *Agent) work(ctx context.Context) error {
	if _, err := os.Stat(a.cfg.StateDir + "/" + homeName); a.home.Home != "" && errors.Is(err, fs.ErrNotExist) {
		a.log.Info("home.json was deleted: resolving again", "previous_home", a.home.Home)
		a.mu.Lock()
		a.home = Home{}
		a.mu.Unlock()
	}
	if a.home.Home == "" {
		if err := a.resolve(ctx); err != nil {
			return err
		}
	}
	if a.registration.RegisteredAt.IsZero() {
		if err := a.register(ctx); err != nil {
			return err
		}
	}
	signed, err := client.NewClientWithResponses(a.home.Home, client.WithHTTPClient(signer{doer: a.hc, identity: a.identity, now: time.Now}))
	if err != nil {
		return err
	}
	if err := a.sendAll(ctx, signed); err != nil {
		return err
	}
	return a.jobs(ctx, signed)
}
