package cli

import "testing"

func TestSettingsGetFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdSettingsGet, []flagCase[settingsGetOptions]{
		{name: "no arguments", args: nil, want: settingsGetOptions{}},
		{name: "an argument", args: []string{"require_mfa"}, wantErr: `unexpected argument "require_mfa"`},
	})
}

func TestSettingsSetFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdSettingsSet, []flagCase[settingsSetOptions]{
		{name: "file and version", args: []string{"-f", "settings.json", "--if-match", "1"},
			want: settingsSetOptions{File: "settings.json", IfMatch: "1"}},
		{name: "stdin, current and key", args: []string{"--file", "-", "--if-match", "current", "--idempotency-key", "k"},
			want: settingsSetOptions{File: "-", IfMatch: "current", IdempotencyKey: "k"}},
		{name: "no file", args: []string{"--if-match", "1"}, wantErr: `required flag(s) "file" not set`},
		{name: "no if-match", args: []string{"-f", "settings.json"}, wantErr: `required flag(s) "if-match" not set`},
		{name: "an argument", args: []string{"settings.json", "--if-match", "1", "-f", "s.json"}, wantErr: `unexpected argument "settings.json"`},
	})
}
