// Command renga-agent is the agent alone: `renga-agent --config agent.yaml` does what
// `renga agent run --config agent.yaml` does, in a program that links the agent and nothing of
// the server, so that it stays small in memory on customers' hosts (bench/agent_footprint_test.go
// measures it). `renga agent run` and `renga agent status` keep working from the one binary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"renga.dev/renga/agent"
)

// Exit codes, as the renga CLI's: 2 for a usage or configuration error, 1 otherwise.
const (
	exitError = 1
	exitUsage = 2
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	fs := flag.NewFlagSet("renga-agent", flag.ContinueOnError)
	config := fs.String("config", "", "the agent's YAML configuration file")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "renga-agent: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintln(os.Stderr, "renga-agent: --log-level must be debug, info, warn or error")
		return exitUsage
	}
	cfg, err := agent.LoadConfig(*config, os.Getenv)
	if err != nil {
		fmt.Fprintf(os.Stderr, "renga-agent: configuration refused: %v\n", err)
		return exitUsage
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	a, err := agent.New(cfg, agent.Options{Logger: log})
	var ce *agent.ConfigError
	switch {
	case errors.As(err, &ce):
		fmt.Fprintf(os.Stderr, "renga-agent: configuration refused: %v\n", err)
		return exitUsage
	case err != nil:
		fmt.Fprintf(os.Stderr, "renga-agent: %v\n", err)
		return exitError
	}
	defer func() { _ = a.Close() }()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := a.Run(ctx); err != nil {
		log.Error("agent failed", "error", err)
		return exitError
	}
	log.Info("agent stopped")
	return 0
}
