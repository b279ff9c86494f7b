package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"reflect"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// documentFlags are the flags of a command that replaces a JSON document: the document ("-"
// for stdin), the version it replaces and an optional Idempotency-Key.
type documentFlags struct {
	File, IfMatch, IdempotencyKey *string
}

// register adds the flags, both --file and --if-match required; fileUsage and ifMatchUsage are
// their help texts.
func (d documentFlags) register(cmd *cobra.Command, fileUsage, ifMatchUsage string) {
	cmd.Flags().StringVarP(d.File, "file", "f", "", fileUsage)
	cmd.Flags().StringVar(d.IfMatch, "if-match", "", ifMatchUsage)
	cmd.Flags().StringVar(d.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagRequired("if-match")
}

// putDocument is every `set -f FILE --if-match VERSION` command: it reads the document,
// connects, resolves --if-match (with "current", get reads the version stored now: its ETag)
// and PUTs the document under the Idempotency-Key, if one was given. It returns the PUT's
// response once checked.
func putDocument[G, P apiResponse](ctx context.Context, f *Factory, d documentFlags,
	connect func() (*client.ClientWithResponses, error),
	get func(context.Context, *client.ClientWithResponses) (G, error),
	put func(ctx context.Context, c *client.ClientWithResponses, ifMatch string, key *string, body io.Reader) (P, error),
) (P, error) {
	var none P
	body, err := readInput(f, *d.File)
	if err != nil {
		return none, err
	}
	c, err := connect()
	if err != nil {
		return none, err
	}
	tag, err := f.ifMatch(*d.IfMatch, func() (string, error) {
		r, err := get(ctx, c)
		if err := check(r, err); err != nil {
			return "", err
		}
		return responseHeader(r).Get("ETag"), nil
	})
	if err != nil {
		return none, err
	}
	key := optionalIdempotencyKey(*d.IdempotencyKey)
	r, err := put(ctx, c, tag, key, bytes.NewReader(body))
	if err := f.checkKeyed(key, r, err); err != nil {
		return none, err
	}
	return r, nil
}

// responseHeader is the header of a generated response (every one keeps its HTTPResponse).
func responseHeader(resp apiResponse) http.Header {
	hr, _ := reflect.ValueOf(resp).Elem().FieldByName("HTTPResponse").Interface().(*http.Response)
	if hr == nil {
		return nil
	}
	return hr.Header
}
