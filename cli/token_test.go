package cli

import "testing"

func TestTokenShowFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdTokenShow, []flagCase[tokenShowOptions]{
		{name: "no arguments", args: nil, want: tokenShowOptions{}},
		{name: "an argument", args: []string{"tok_1"}, wantErr: `unexpected argument "tok_1"`},
	})
}

func TestTokenRevokeSelfFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdTokenRevokeSelf, []flagCase[tokenRevokeSelfOptions]{
		{name: "no arguments", args: nil, want: tokenRevokeSelfOptions{}},
		{name: "idempotency key", args: []string{"--idempotency-key", "k"}, want: tokenRevokeSelfOptions{IdempotencyKey: "k"}},
		{name: "another token", args: []string{"tok_1"}, wantErr: `unexpected argument "tok_1"`},
	})
}
