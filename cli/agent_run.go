package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"renga.dev/renga/agent"
)

// The agent program: `renga agent run` on an organization's hosts, and `renga agent status`
// beside it. They read agent.yaml and RENGA_AGENT_*, never the deployment's RENGA_* settings.

func newCmdAgent(f *Factory) *cobra.Command {
	cmd := group("agent", "Run the agent on a host, or show its state")
	cmd.AddCommand(newCmdAgentRun(f, nil), newCmdAgentStatus(f, nil))
	return cmd
}

type agentRunOptions struct {
	f *Factory

	Config   string
	LogLevel string
}

// newCmdAgentRun is `renga agent run`.
func newCmdAgentRun(f *Factory, runF func(*agentRunOptions) error) *cobra.Command {
	opts := &agentRunOptions{f: f}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the agent: resolve its home, collect host facts, send them, run its jobs",
		Long: `Run the agent until SIGINT or SIGTERM. Settings come from --config (YAML: renga_url,
intake_key or intake_key_file, state_dir, allow_insecure_http, interval, queue_max_bytes) and
from RENGA_AGENT_<SETTING> environment variables, which win. A bad setting refuses to start and
is named. Logs are JSON lines on stderr.`,
		Args: positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch opts.LogLevel {
			case "debug", "info", "warn", "error":
			default:
				return usageError("--log-level must be debug, info, warn or error")
			}
			if runF != nil {
				return runF(opts)
			}
			return agentRunRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Config, "config", "", "the agent's YAML configuration file")
	cmd.Flags().StringVar(&opts.LogLevel, "log-level", "info", "debug, info, warn or error")
	return cmd
}

func agentRunRun(ctx context.Context, opts *agentRunOptions) error {
	f := opts.f
	cfg, err := agent.LoadConfig(opts.Config, f.Getenv)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("configuration refused: %w", err)}
	}
	// Signals are taken before anything is opened, so SIGTERM always stops the agent cleanly.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	var level slog.Level
	_ = level.UnmarshalText([]byte(opts.LogLevel))
	log := slog.New(slog.NewJSONHandler(f.Stderr, &slog.HandlerOptions{Level: level}))
	a, err := agent.New(cfg, agent.Options{Logger: log})
	var ce *agent.ConfigError
	if errors.As(err, &ce) {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("configuration refused: %w", err)}
	}
	if err != nil {
		return err
	}
	defer func() { _ = a.Close() }()
	if err := a.Run(ctx); err != nil {
		return err
	}
	log.Info("agent stopped")
	return nil
}

type agentStatusOptions struct {
	f *Factory

	Config string
}

// newCmdAgentStatus is `renga agent status`.
func newCmdAgentStatus(f *Factory, runF func(*agentStatusOptions) error) *cobra.Command {
	opts := &agentStatusOptions{f: f}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the agent's installation ID, home, queue depth and last successful send",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return agentStatusRun(opts)
		},
	}
	cmd.Flags().StringVar(&opts.Config, "config", "", "the agent's YAML configuration file")
	return cmd
}

func agentStatusRun(opts *agentStatusOptions) error {
	f := opts.f
	cfg, err := agent.LoadConfig(opts.Config, f.Getenv)
	if err != nil {
		return &ExitError{Code: ExitUsage, Err: fmt.Errorf("configuration refused: %w", err)}
	}
	s, err := agent.ReadStatus(cfg.StateDir)
	if err != nil {
		return err
	}
	if f.JSON() {
		b, err := json.Marshal(s)
		if err != nil {
			return err
		}
		return f.printJSON(b)
	}
	when := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		return t.UTC().Format(time.RFC3339)
	}
	home := s.Home
	if home == "" {
		home = "(not resolved)"
	}
	rows := [][]string{
		{"installation_id", s.InstallationID},
		{"renga_url", cfg.RengaURL},
		{"home", home},
		{"resolved_at", when(s.ResolvedAt)},
		{"registered", strconv.FormatBool(s.Registered)},
		{"queue_depth", strconv.FormatInt(s.Depth, 10)},
		{"queue_bytes", strconv.FormatInt(s.Bytes, 10)},
		{"dropped", strconv.FormatInt(s.Dropped, 10)},
		{"rejected", strconv.FormatInt(s.Rejected, 10)},
		{"last_successful_send", when(s.LastSend)},
	}
	if !s.AsOf.IsZero() {
		rows = append(rows, []string{"as_of", when(s.AsOf) + " (the running agent's status.json)"})
	}
	return f.printTable([]string{"FIELD", "VALUE"}, rows)
}
