package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"renga.dev/renga/cli"
	"renga.dev/renga/server/servertest"
)

// devRun is one `renga serve --dev` running in the background, and what it printed.
type devRun struct {
	url, token, databaseURL string
	out, errOut             *servertest.SyncBuffer
	stop                    func()
}

var devExports = regexp.MustCompile(`export RENGA_URL=(\S+)\s+export RENGA_OPERATOR_TOKEN=(\S+)\s+export RENGA_DATABASE_URL='([^']+)'\n`)

// startDev runs `renga serve --dev` with env, as `make run` does, until it has printed its
// export lines; stop ends it and checks the embedded PostgreSQL stopped with it.
func startDev(t *testing.T, env map[string]string) *devRun {
	t.Helper()
	out, errOut := &servertest.SyncBuffer{}, &servertest.SyncBuffer{}
	f := &cli.Factory{Stdout: out, Stderr: errOut, Getenv: func(k string) string { return env[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- cli.RunContext(ctx, f, []string{"serve", "--dev"}) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d: %s", code, errOut.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
		if _, err := os.Stat(filepath.Join(env["RENGA_DATA_DIR"], "postgres", "data", "postmaster.pid")); !os.IsNotExist(err) {
			t.Errorf("embedded PostgreSQL still running (%v)", err)
		}
	}
	t.Cleanup(stop)
	var m []string
	for deadline := time.Now().Add(60 * time.Second); m == nil; {
		if m = devExports.FindStringSubmatch(out.String()); m == nil {
			select {
			case code := <-done:
				t.Fatalf("serve exited %d: %s", code, errOut.String())
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no export lines printed: %s %s", out.String(), errOut.String())
			}
		}
	}
	return &devRun{url: m[1], token: m[2], databaseURL: m[3], out: out, errOut: errOut, stop: stop}
}

// TestServeDev runs `renga serve --dev` as `make run` does: a private PostgreSQL in the data
// directory, migrated, and a printed full-scope token that works against the printed URL, with
// the printed database URL for release commands. A restart reuses the dev token recorded in the
// data directory; one close to its expiry is revoked and replaced.
func TestServeDev(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"RENGA_DATA_DIR": filepath.Join(dir, "data"), "RENGA_LISTEN": "127.0.0.1:0"}
	first := startDev(t, env)
	remote := map[string]string{"RENGA_URL": first.url, "RENGA_OPERATOR_TOKEN": first.token}
	if r := run(t, remote, "-o", "json", "org", "create", "acme", "--display-name", "Acme"); r.code != 0 {
		t.Fatalf("create with the dev token: %+v", r)
	}
	if r := run(t, remote, "-o", "json", "token", "show"); r.code != 0 || strings.Count(r.stdout, ":read") < 7 {
		t.Errorf("dev token is not full-scope: %+v", r)
	}
	// The token is printed once, in its export line; the logs never carry it.
	if strings.Contains(first.errOut.String(), first.token) {
		t.Error("the dev token appears in the logs")
	}
	if n := strings.Count(first.out.String(), first.token); n != 1 {
		t.Errorf("the dev token is printed %d times:\n%s", n, first.out.String())
	}
	// The third export line is the database of release commands.
	release := map[string]string{"RENGA_DATABASE_URL": first.databaseURL}
	if r := run(t, release, "-o", "json", "operator-token", "list"); r.code != 0 || strings.Count(r.stdout, `"name": "dev"`) != 1 {
		t.Errorf("operator-token list with the printed RENGA_DATABASE_URL: %+v", r)
	}
	// The token's secret is recorded for the next start, readable by this user only.
	record := filepath.Join(dir, "data", "dev-token")
	if st, err := os.Stat(record); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("dev-token record: %v (%v)", st, err)
	}
	first.stop()

	// A restart reuses it: the exported lines still work, and no other token is minted.
	second := startDev(t, env)
	if second.token != first.token || !strings.Contains(second.out.String(), "the one an earlier start minted") {
		t.Fatalf("restart printed another token:\n%s", second.out.String())
	}
	remote["RENGA_URL"] = second.url
	if r := run(t, remote, "org", "list"); r.code != 0 {
		t.Errorf("the reused token does not work: %+v", r)
	}
	release["RENGA_DATABASE_URL"] = second.databaseURL
	if r := run(t, release, "-o", "json", "operator-token", "list"); strings.Count(r.stdout, `"name": "dev"`) != 1 {
		t.Errorf("a restart left another dev token: %+v", r)
	}
	// Close to its expiry, it is revoked at the next start and replaced.
	pool, err := pgxpool.New(context.Background(), second.databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `UPDATE operator_tokens SET expires_at = now() + interval '1 hour' WHERE name = 'dev'`); err != nil {
		t.Fatal(err)
	}
	pool.Close()
	second.stop()

	third := startDev(t, env)
	if third.token == first.token || !strings.Contains(third.out.String(), "minted for this data directory") {
		t.Fatalf("a token an hour from expiry was reused:\n%s", third.out.String())
	}
	if r := run(t, map[string]string{"RENGA_URL": third.url, "RENGA_OPERATOR_TOKEN": first.token}, "org", "list"); r.code != cli.ExitAuth {
		t.Errorf("the replaced dev token still works: %+v", r)
	}
	if r := run(t, map[string]string{"RENGA_URL": third.url, "RENGA_OPERATOR_TOKEN": third.token}, "org", "list"); r.code != 0 {
		t.Errorf("the new dev token does not work: %+v", r)
	}
	release["RENGA_DATABASE_URL"] = third.databaseURL
	if r := run(t, release, "-o", "json", "operator-token", "list"); strings.Count(r.stdout, `"revoked_at": null`) != 1 {
		t.Errorf("more than one usable token after the replacement: %+v", r)
	}
}

func TestServeRefusesBadConfiguration(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "RENGA_DATABASE_URL"},
		{map[string]string{"RENGA_DATABASE_URL": "postgres://x/y", "RENGA_PUBLIC_URL": "https://r.example"}, "RENGA_TLS_CERT_FILE"},
		{map[string]string{"RENGA_DATABASE_URL": "postgres://x/y", "RENGA_PUBLIC_URL": "https://r.example", "RENGA_TRUSTED_PROXIES": "10.0.0.0/8",
			"RENGA_DEPLOYMENT_ID": "EU_1"}, "RENGA_DEPLOYMENT_ID"},
		{map[string]string{"RENGA_DATABASE_URL": "postgres://x/y", "RENGA_PUBLIC_URL": "http://r.example", "RENGA_TRUSTED_PROXIES": "10.0.0.0/8"}, "RENGA_PUBLIC_URL"},
		{map[string]string{"RENGA_ENV": "staging"}, "RENGA_ENV"},
		{map[string]string{"RENGA_DATABASE_URL": "postgres://x/y", "RENGA_PUBLIC_URL": "https://r.example", "RENGA_TRUSTED_PROXIES": "10.0.0.0/33"}, "RENGA_TRUSTED_PROXIES"},
		{map[string]string{"RENGA_DATABASE_URL": "postgres://x/y", "RENGA_PUBLIC_URL": "https://r.example", "RENGA_TRUSTED_PROXIES": "10.0.0.0/8",
			"RENGA_DELETION_GRACE_PERIOD": "soon"}, "RENGA_DELETION_GRACE_PERIOD"},
	} {
		r := run(t, c.env, "serve")
		if r.code != cli.ExitUsage || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %s", c.env, r.code, r.stderr, c.want)
		}
	}
}
