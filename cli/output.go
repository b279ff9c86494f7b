package cli

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"renga.dev/renga/api/textrule"
)

// apiResponse is what every generated *Response offers.
type apiResponse interface{ StatusCode() int }

// problemBody is the part of a problem the CLI reports.
type problemBody struct {
	Title         string `json:"title"`
	Detail        string `json:"detail"`
	Error         string `json:"error"`
	RequestID     string `json:"request_id"`
	RequiredScope string `json:"required_scope"`
	Errors        []struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	} `json:"errors"`
}

// check turns a transport error or an error response into an ExitError with the documented
// exit code.
func check(resp apiResponse, err error) error {
	if err != nil {
		return fmt.Errorf("request failed: %w", err)
	}
	status := resp.StatusCode()
	// Every generated response has the raw body in its Body field.
	body := reflect.ValueOf(resp).Elem().FieldByName("Body").Bytes()
	if status < 400 {
		return nil
	}
	var p problemBody
	_ = json.Unmarshal(body, &p)
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	for _, fe := range p.Errors {
		msg += fmt.Sprintf("\n  %s: %s", fe.Field, fe.Message)
	}
	msg += fmt.Sprintf(" (%d %s", status, p.Error)
	if p.RequestID != "" {
		msg += ", request " + p.RequestID
	}
	msg += ")"
	code := ExitFailure
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		code = ExitAuth
	case http.StatusPreconditionFailed, http.StatusPreconditionRequired:
		code = ExitPrecondition
	case http.StatusConflict:
		code = ExitConflict
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		code = ExitUsage
	}
	return &ExitError{Code: code, Err: errors.New(msg)}
}

// printJSON writes the API's JSON body, indented.
func (f *Factory) printJSON(body []byte) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, body, "", "  "); err != nil {
		_, err = f.Stdout.Write(body)
		return err
	}
	buf.WriteByte('\n')
	_, err := f.Stdout.Write(buf.Bytes())
	return err
}

// writeJSON prints a value the CLI itself produced (release-only commands).
func writeJSON(f *Factory, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return f.printJSON(b)
}

// printTable writes rows under headers: aligned on a terminal, tab-separated otherwise. Each
// cell shows the characters openapi.yaml refuses in names as their escapes (\u202E): stored or
// imported text may hold them, and a control character, tab or newline in a cell would act on
// the terminal or break the row.
func (f *Factory) printTable(headers []string, rows [][]string) error {
	for _, r := range rows {
		for i, cell := range r {
			r[i] = textrule.Escaped(cell)
		}
	}
	if f.output == "tsv" {
		for _, r := range rows {
			if _, err := fmt.Fprintln(f.Stdout, strings.Join(r, "\t")); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(f.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(headers, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// print renders a successful response: its JSON, or the table the command makes of it.
func (f *Factory) print(body []byte, headers []string, rows func() [][]string) error {
	if f.JSON() {
		return f.printJSON(body)
	}
	return f.printTable(headers, rows())
}

// newIdempotencyKey is the key a command sends where the API requires one: the flag's, or a
// new one.
func newIdempotencyKey(flag string) string {
	if flag != "" {
		return flag
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// optionalIdempotencyKey is the key to send where the API makes it optional: the flag's, or
// none.
func optionalIdempotencyKey(flag string) *string {
	if flag == "" {
		return nil
	}
	return &flag
}

// checkKeyed is check for a request sent under an Idempotency-Key (key nil when none), telling
// on stderr which key it used when a rerun under it could matter (keyHint).
func (f *Factory) checkKeyed(key *string, resp apiResponse, err error) error {
	if key != nil {
		f.keyHint(*key, false, resp, err)
	}
	return check(resp, err)
}

// checkKeyedShownOnce is checkKeyed for an operation whose answer shows a secret once
// (x-renga-secret-fields): a replay under its key answers without the secret.
func (f *Factory) checkKeyedShownOnce(key string, resp apiResponse, err error) error {
	f.keyHint(key, true, resp, err)
	return check(resp, err)
}

// keyHint says on stderr which Idempotency-Key a write used, when rerunning under it could
// matter: after a success (a rerun answers with the stored result instead of repeating the
// operation) and when the outcome is unknown (no answer, or a 5xx, which may come from a proxy
// after the server acted). After a 4xx nothing was stored and nothing changed: a rerun
// executes afresh, so the key is not worth a line.
func (f *Factory) keyHint(key string, shownOnce bool, resp apiResponse, err error) {
	unknown := err != nil || resp.StatusCode() >= 500
	if !unknown && resp.StatusCode() >= 300 {
		return
	}
	msg := fmt.Sprintf("rerun with --idempotency-key %s to get this result again without repeating the operation", key)
	if shownOnce {
		msg += "; the rerun's answer leaves out the secret, shown only this once"
	}
	if unknown {
		msg = fmt.Sprintf("the outcome is unknown: rerun with --idempotency-key %s to finish the operation without repeating it", key)
		if shownOnce {
			msg += "; if this attempt succeeded, the rerun's answer leaves out the secret (shown only once): rotate it then"
		}
	}
	fmt.Fprintf(f.Stderr, "Idempotency-Key: %s (%s)\n", key, msg)
}

// ifMatch is the If-Match value: the flag's version quoted as a strong tag, or, for "current",
// the ETag stored now (an explicit choice to overwrite unseen changes).
func (f *Factory) ifMatch(flag string, current func() (string, error)) (string, error) {
	if flag == "current" {
		tag, err := current()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(f.Stderr, "If-Match: %s (the current version)\n", tag)
		return tag, nil
	}
	if _, err := strconv.ParseInt(flag, 10, 64); err == nil {
		return `"` + flag + `"`, nil
	}
	return flag, nil
}

// readInput reads a document from a file, or from stdin for "-".
func readInput(f *Factory, file string) ([]byte, error) {
	if file == "-" {
		return io.ReadAll(f.Stdin)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, usageError("%v", err)
	}
	return b, nil
}

func relTime(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < 0:
		return "in " + roundDuration(-d)
	case d < time.Minute:
		return "just now"
	default:
		return roundDuration(d) + " ago"
	}
}

func roundDuration(d time.Duration) string {
	switch {
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// timeCell is a relative time on a terminal and RFC 3339 when piped.
func (f *Factory) timeCell(t time.Time) string {
	if f.output == "table" {
		return relTime(t)
	}
	return t.UTC().Format(time.RFC3339)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func orNone(s *string) string {
	if s == nil || *s == "" {
		return "(none)"
	}
	return *s
}
