package cli

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// flagCase is one command line given to a command: the options it parses into, or the usage
// error it is refused with. The flag-parsing tests of every command are tables of these; they
// need no server and no database, since the command's runF only captures its options.
type flagCase[T any] struct {
	name string
	args []string
	// want is compared with the parsed options on their exported fields (the arguments and
	// flags), unless check is set.
	want  T
	check func(t *testing.T, got *T)
	// wantErr, when set, is part of the usage error (exit code 2) the command line fails with.
	wantErr string
	// terminal makes stdin a terminal (a person can answer a confirmation).
	terminal bool
}

// testFlags runs each case's arguments through the command newCmd builds with a capturing runF.
func testFlags[T any](t *testing.T, newCmd func(*Factory, func(*T) error) *cobra.Command, cases []flagCase[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &Factory{Stdout: io.Discard, Stderr: io.Discard, Stdin: strings.NewReader(""),
				Getenv: func(string) string { return "" }, StdinIsTerminal: tc.terminal}
			var got *T
			cmd := newCmd(f, func(o *T) error {
				got = o
				return nil
			})
			err := execute(cmd, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || exitCode(err) != ExitUsage {
					t.Fatalf("%q: error %v (exit %d), want a usage error containing %q", tc.args, err, exitCode(err), tc.wantErr)
				}
				if got != nil {
					t.Errorf("%q: the run function was called despite the usage error", tc.args)
				}
				return
			}
			if err != nil {
				t.Fatalf("%q: %v", tc.args, err)
			}
			if got == nil {
				t.Fatalf("%q: the run function was not called", tc.args)
			}
			if fv := reflect.ValueOf(got).Elem().FieldByName("f"); !fv.IsValid() || fv.Pointer() != reflect.ValueOf(f).Pointer() {
				t.Errorf("the options do not hold the command's Factory")
			}
			if tc.check != nil {
				tc.check(t, got)
				return
			}
			if field, ok := exportedFieldsEqual(*got, tc.want); !ok {
				t.Errorf("%q: %s = %#v, want %#v", tc.args, field,
					reflect.ValueOf(*got).FieldByName(field).Interface(), reflect.ValueOf(tc.want).FieldByName(field).Interface())
			}
		})
	}
}

// execute runs a command on its own as the root command would: flag errors are usage errors.
func execute(cmd *cobra.Command, args []string) error {
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetFlagErrorFunc(flagError)
	return cmd.ExecuteContext(context.Background())
}

// exportedFieldsEqual compares two structs on their exported fields and names the first that
// differs.
func exportedFieldsEqual[T any](got, want T) (string, bool) {
	g, w := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := range g.NumField() {
		field := g.Type().Field(i)
		if !field.IsExported() {
			continue
		}
		if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
			return field.Name, false
		}
	}
	return "", true
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitFailure},
		{usageError("bad"), ExitUsage},
		{&ExitError{Code: ExitPrecondition, Err: errors.New("stale")}, ExitPrecondition},
		{errors.New(`unknown command "x" for "renga"`), ExitUsage},
		{errors.New("accepts 1 arg(s), received 0"), ExitUsage},
		{errors.New(`required flag(s) "name" not set`), ExitUsage},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// TestGroupsNeedASubcommand checks every command that only holds subcommands refuses to run
// alone, or with an unknown subcommand, as a usage error.
func TestGroupsNeedASubcommand(t *testing.T) {
	t.Parallel()
	root := NewRootCommand(&Factory{Getenv: func(string) string { return "" }})
	root.SetOut(io.Discard)
	var groups []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.HasSubCommands() {
				groups = append(groups, sub)
				walk(sub)
			}
		}
	}
	walk(root)
	if len(groups) < 10 {
		t.Fatalf("found %d command groups", len(groups))
	}
	for _, g := range groups {
		for _, args := range [][]string{nil, {"frobnicate"}} {
			err := g.RunE(g, args)
			if exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "needs a subcommand") {
				t.Errorf("%s %v: %v", g.CommandPath(), args, err)
			}
		}
	}
}

// commandsUnder lists the commands under c, depth first: groups (with subcommands) and leaves.
func commandsUnder(c *cobra.Command) (groups, leaves []*cobra.Command) {
	for _, sub := range c.Commands() {
		if sub.Hidden || sub.Name() == "help" || sub.Name() == "completion" {
			continue
		}
		if sub.HasSubCommands() {
			groups = append(groups, sub)
			g, l := commandsUnder(sub)
			groups, leaves = append(groups, g...), append(leaves, l...)
		} else {
			leaves = append(leaves, sub)
		}
	}
	return groups, leaves
}

// runLine runs a command line with no environment and returns its exit code and stderr.
func runLine(args ...string) (int, string) {
	var stderr strings.Builder
	f := &Factory{Stdout: io.Discard, Stderr: &stderr, Stdin: strings.NewReader(""), Getenv: func(string) string { return "" }}
	return Run(f, args), stderr.String()
}

// TestUnknownSubcommandSuggests: a mistyped subcommand of any group suggests the subcommand,
// as a mistyped top-level command does.
func TestUnknownSubcommandSuggests(t *testing.T) {
	t.Parallel()
	if code, stderr := runLine("org", "lst"); code != ExitUsage || !strings.Contains(stderr, `unknown command "lst" for "renga org"`) ||
		!strings.Contains(stderr, "Did you mean this?\n\tlist\n") {
		t.Errorf("renga org lst: exit %d, stderr %q", code, stderr)
	}
	if code, stderr := runLine("orgs"); code != ExitUsage || !strings.Contains(stderr, "Did you mean this?\n\torg\n") {
		t.Errorf("renga orgs: exit %d, stderr %q", code, stderr)
	}
	groups, _ := commandsUnder(NewRootCommand(&Factory{Getenv: func(string) string { return "" }}))
	for _, g := range groups {
		path := strings.Fields(g.CommandPath())[1:]
		for _, sub := range g.Commands() {
			name := sub.Name()
			if sub.Hidden || len(name) < 3 {
				continue
			}
			typo := name[:1] + name[2:] // a letter left out
			code, stderr := runLine(append(path, typo)...)
			if code != ExitUsage || !strings.Contains(stderr, "Did you mean this?") || !strings.Contains(stderr, "\t"+name+"\n") {
				t.Errorf("%s %s: exit %d, stderr %q, want a suggestion of %s", g.CommandPath(), typo, code, stderr, name)
			}
		}
	}
}

// usePositionals are the positional arguments a command's Use shows: required (NAME) and all
// (with the optional [NAME]); a flag's value (--name NAME) is not one.
func usePositionals(use string) (required, all []string) {
	words := strings.Fields(use)[1:]
	for i := 0; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, "-") {
			if i+1 < len(words) && !strings.HasPrefix(words[i+1], "-") {
				i++
			}
			continue
		}
		all = append(all, w)
		if !strings.HasPrefix(w, "[") {
			required = append(required, w)
		}
	}
	return required, all
}

// TestPositionalArguments: every command names a missing argument and shows its usage, and
// refuses an extra one the same way, before anything runs.
func TestPositionalArguments(t *testing.T) {
	t.Parallel()
	code, stderr := runLine("org", "get")
	if code != ExitUsage || !strings.HasPrefix(stderr, "error: missing argument ORGANIZATION_ID\n\nUsage:\n  renga org get ORGANIZATION_ID [flags]\n") {
		t.Errorf("renga org get: exit %d, stderr %q", code, stderr)
	}
	if code, stderr := runLine("org", "invite"); code != ExitUsage || !strings.HasPrefix(stderr, "error: missing arguments ORGANIZATION_ID EMAIL\n") {
		t.Errorf("renga org invite: exit %d, stderr %q", code, stderr)
	}
	if code, stderr := runLine("org", "invite", "org_1"); code != ExitUsage || !strings.HasPrefix(stderr, "error: missing argument EMAIL\n") {
		t.Errorf("renga org invite org_1: exit %d, stderr %q", code, stderr)
	}
	_, leaves := commandsUnder(NewRootCommand(&Factory{Getenv: func(string) string { return "" }}))
	if len(leaves) < 30 {
		t.Fatalf("found %d commands", len(leaves))
	}
	for _, c := range leaves {
		path := strings.Fields(c.CommandPath())[1:]
		// (This tree never ran, so cobra has not yet added the flags that make its use line end
		// in [flags].)
		usage := "\nUsage:\n  " + strings.TrimSuffix(c.UseLine(), " [flags]")
		required, all := usePositionals(c.Use)
		if len(required) > 0 {
			code, stderr := runLine(path...)
			want := "error: missing argument " + required[0] + "\n"
			if len(required) > 1 {
				want = "error: missing arguments " + strings.Join(required, " ") + "\n"
			}
			if code != ExitUsage || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, usage) {
				t.Errorf("%s without arguments: exit %d, stderr %q, want %q and the usage", c.CommandPath(), code, stderr, want)
			}
		}
		extra := append(path, make([]string, len(all))...)
		extra = append(extra, "extra")
		code, stderr := runLine(extra...)
		if code != ExitUsage || !strings.HasPrefix(stderr, "error: unexpected argument \"extra\"\n") || !strings.Contains(stderr, usage) {
			t.Errorf("%s with an extra argument: exit %d, stderr %q", c.CommandPath(), code, stderr)
		}
	}
}
