// Package cli is the `renga` command: the server (serve, migrate), release-only commands, and
// client commands for every API operation. Client commands always use the generated client:
// remotely over HTTP, or as release commands through an in-process transport into the same
// server handler, as the local operator.
//
// Each command follows the GitHub CLI's shape: a <noun><Verb>Options struct holds the Factory,
// the positional arguments and the flags; newCmd<Noun><Verb>(f, runF) only parses into it (and
// refuses flag combinations that need no server, with exit code 2); <noun><Verb>Run(ctx, opts)
// does the work through the generated client. Tests pass a runF that captures the options, so
// flag parsing is tested without a server. Files are named by the resource, as the server's are.
package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes (DESIGN §10).
const (
	ExitOK           = 0
	ExitFailure      = 1
	ExitUsage        = 2
	ExitAuth         = 4
	ExitPrecondition = 5
	ExitConflict     = 6
)

// Version is set at build time.
var Version = "dev"

// ExitError carries the process exit code of a failed command.
type ExitError struct {
	Code int
	Err  error
	// Usage, when set, is the command's usage, printed after the error.
	Usage string
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

func usageError(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// flagError makes pflag's errors (unknown flag, bad value) usage errors.
func flagError(_ *cobra.Command, err error) error { return &ExitError{Code: ExitUsage, Err: err} }

// NewRootCommand builds the `renga` command tree.
func NewRootCommand(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:           "renga",
		Short:         "Run and operate a Renga deployment",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			switch f.output {
			case "":
				f.output = "table"
				if !f.IsTerminal {
					f.output = "tsv"
				}
			case "table", "json":
				if f.output == "table" && !f.IsTerminal {
					f.output = "tsv"
				}
			default:
				return usageError("--output must be table or json")
			}
			return nil
		},
	}
	pf := root.PersistentFlags()
	pf.StringVarP(&f.output, "output", "o", "", "output format: table or json (default: table on a terminal, tab-separated rows otherwise)")
	pf.StringVar(&f.url, "url", "", "deployment URL (default $RENGA_URL)")
	pf.BoolVar(&f.local, "local", false, "run as a release command on the server host (uses $RENGA_DATABASE_URL)")
	pf.StringVar(&f.databaseURL, "database-url", "", "PostgreSQL URL for release commands (default $RENGA_DATABASE_URL)")
	root.SetFlagErrorFunc(flagError)
	root.AddCommand(newCmdServe(f, nil), newCmdMigrate(f, nil), newCmdVersion(f, nil), newCmdOperatorToken(f),
		newCmdDeployment(f), newCmdToken(f), newCmdOrganization(f), newCmdAudit(f), newCmdInvitation(f),
		newCmdPolicy(f), newCmdSupport(f), newCmdUsage(f, nil), newCmdOwner(f), newCmdIdentityProvider(f), newCmdSecretKey(f),
		newCmdAgent(f), newCmdResolver(f), newCmdTransfer(f))
	return root
}

// Execute runs the command line with the process's environment and returns the exit code.
func Execute(args []string) int {
	f := NewFactory()
	defer f.Close()
	return Run(f, args)
}

// Run runs the command line with f and returns the exit code; errors go to f.Stderr.
func Run(f *Factory, args []string) int { return RunContext(context.Background(), f, args) }

// RunContext is Run with a context whose cancellation stops the command (as a signal does).
func RunContext(ctx context.Context, f *Factory, args []string) int {
	root := NewRootCommand(f)
	root.SetArgs(args)
	root.SetOut(f.Stdout)
	root.SetErr(f.Stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintln(f.Stderr, "error:", err)
	var ee *ExitError
	if errors.As(err, &ee) && ee.Usage != "" {
		fmt.Fprint(f.Stderr, "\n"+ee.Usage)
	}
	return exitCode(err)
}

// exitCode is the documented exit code of a command's error.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	// cobra's own argument errors are usage errors.
	if strings.HasPrefix(err.Error(), "unknown command") || strings.Contains(err.Error(), "arg(s)") ||
		strings.HasPrefix(err.Error(), "required flag") {
		return ExitUsage
	}
	return ExitFailure
}

// group is a command that only holds subcommands; an unknown subcommand is a usage error that
// suggests the closest ones, as the top level does.
func group(use, short string, aliases ...string) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Aliases: aliases,
		Args:                       unknownSubcommand,
		SuggestionsMinimumDistance: 2,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_ = cmd.Help()
			return usageError("%s needs a subcommand", cmd.CommandPath())
		},
	}
}

// unknownSubcommand refuses a group's argument, which names no subcommand of it, with the
// subcommands it may have meant (cobra does this for the root command only).
func unknownSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
	}
	return usageError("%s", msg)
}

// positional checks a command's positional arguments against their names as its Use shows
// them: NAME is required, [NAME] optional, none means the command takes none. A missing
// argument is named, an extra one shown, and either error carries the command's usage. Every
// command checks its arguments with it, so all say the same.
func positional(names ...string) cobra.PositionalArgs {
	required := 0
	for _, n := range names {
		if !strings.HasPrefix(n, "[") {
			required++
		}
	}
	return func(cmd *cobra.Command, args []string) error {
		var err error
		switch {
		case len(args) < required && required-len(args) == 1:
			err = fmt.Errorf("missing argument %s", names[len(args)])
		case len(args) < required:
			err = fmt.Errorf("missing arguments %s", strings.Join(names[len(args):required], " "))
		case len(args) > len(names):
			err = fmt.Errorf("unexpected argument %q", args[len(names)])
		default:
			return nil
		}
		return &ExitError{Code: ExitUsage, Err: err, Usage: cmd.UsageString()}
	}
}
