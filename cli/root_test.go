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
}

// testFlags runs each case's arguments through the command newCmd builds with a capturing runF.
func testFlags[T any](t *testing.T, newCmd func(*Factory, func(*T) error) *cobra.Command, cases []flagCase[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := &Factory{Stdout: io.Discard, Stderr: io.Discard, Stdin: strings.NewReader(""),
				Getenv: func(string) string { return "" }}
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
