package cli

import "testing"

func TestServeFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdServe, []flagCase[serveOptions]{
		{name: "production", args: nil, want: serveOptions{}},
		{name: "development", args: []string{"--dev"}, want: serveOptions{Dev: true}},
		{name: "an argument", args: []string{"now"}, wantErr: `unexpected argument "now"`},
		{name: "dev takes no value", args: []string{"--dev=maybe"}, wantErr: `invalid argument "maybe" for "--dev"`},
	})
}

func TestMigrateFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdMigrate, []flagCase[migrateOptions]{
		{name: "up by default", args: nil, want: migrateOptions{Action: "up"}},
		{name: "up", args: []string{"up"}, want: migrateOptions{Action: "up"}},
		{name: "status", args: []string{"status"}, want: migrateOptions{Action: "status"}},
		{name: "unknown action", args: []string{"sideways"}, wantErr: `migrate takes up or status, not "sideways"`},
		{name: "two actions", args: []string{"up", "status"}, wantErr: `unexpected argument "status"`},
	})
}

func TestVersionFlags(t *testing.T) {
	t.Parallel()
	testFlags(t, newCmdVersion, []flagCase[versionOptions]{
		{name: "no arguments", args: nil, want: versionOptions{}},
		{name: "an argument", args: []string{"v1"}, wantErr: `unexpected argument "v1"`},
	})
}
