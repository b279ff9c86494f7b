package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Destructive commands ask the person at the terminal before acting, as the GitHub CLI's
// `repo delete` does: a lifecycle change of an organization wants its slug typed, a revocation
// a yes. --yes answers for them. Without a terminal on stdin there is no one to ask, so such a
// command refuses to run without --yes before it sends anything.

// needConfirmation is the parse-time check of a destructive command: it runs only with --yes
// (yes) or a terminal on stdin to ask.
func (f *Factory) needConfirmation(yes bool, action string) error {
	if yes || f.StdinIsTerminal {
		return nil
	}
	return usageError("%s needs confirmation, and stdin is not a terminal to ask on: pass --yes to confirm", action)
}

// confirmTyped asks for want to be typed (an organization's slug) and refuses any other answer.
func (f *Factory) confirmTyped(question, want string) error {
	answer, err := f.ask(fmt.Sprintf("%s\nType %s to confirm: ", question, want))
	if err != nil {
		return err
	}
	if answer != want {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("not confirmed (typed %q, not %q): nothing changed", answer, want)}
	}
	return nil
}

// confirmYes asks a yes/no question whose default is no.
func (f *Factory) confirmYes(question string) error {
	answer, err := f.ask(question + " [y/N]: ")
	if err != nil {
		return err
	}
	if a := strings.ToLower(answer); a != "y" && a != "yes" {
		return &ExitError{Code: ExitFailure, Err: errors.New("not confirmed: nothing changed")}
	}
	return nil
}

// ask prints the question on stderr and reads one line of answer from stdin.
func (f *Factory) ask(question string) (string, error) {
	fmt.Fprint(f.Stderr, question)
	line, err := bufio.NewReader(f.Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return strings.TrimSpace(line), nil
}
