package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/cli"
	"renga.dev/renga/server/servertest"
)

// TestServeDev runs `renga serve --dev` as `make run` does: a private PostgreSQL in the data
// directory, migrated, and a printed full-scope token that works against the printed URL.
func TestServeDev(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	out, errOut := &servertest.SyncBuffer{}, &servertest.SyncBuffer{}
	env := map[string]string{"RENGA_DATA_DIR": filepath.Join(dir, "data"), "RENGA_LISTEN": "127.0.0.1:0"}
	f := &cli.Factory{Stdout: out, Stderr: errOut, Getenv: func(k string) string { return env[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- cli.RunContext(ctx, f, []string{"serve", "--dev"}) }()
	defer func() {
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("serve exited %d: %s", code, errOut.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
		// The embedded PostgreSQL stopped with it.
		if _, err := os.Stat(filepath.Join(dir, "data", "postgres", "data", "postmaster.pid")); !os.IsNotExist(err) {
			t.Errorf("embedded PostgreSQL still running (%v)", err)
		}
	}()

	exports := regexp.MustCompile(`export RENGA_URL=(\S+)\s+export RENGA_OPERATOR_TOKEN=(\S+)`)
	var m []string
	for deadline := time.Now().Add(60 * time.Second); m == nil; {
		if m = exports.FindStringSubmatch(out.String()); m == nil {
			select {
			case code := <-done:
				t.Fatalf("serve exited %d: %s", code, errOut.String())
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("no token printed: %s %s", out.String(), errOut.String())
			}
		}
	}
	remote := map[string]string{"RENGA_URL": m[1], "RENGA_OPERATOR_TOKEN": m[2]}
	if r := run(t, remote, "-o", "json", "org", "create", "acme", "--display-name", "Acme"); r.code != 0 {
		t.Fatalf("create with the dev token: %+v", r)
	}
	if r := run(t, remote, "-o", "json", "token", "show"); r.code != 0 || strings.Count(r.stdout, ":read") < 7 {
		t.Errorf("dev token is not full-scope: %+v", r)
	}
	// The token is printed once, in its export line; the logs never carry it.
	if strings.Contains(errOut.String(), m[2]) {
		t.Error("the dev token appears in the logs")
	}
	if n := strings.Count(out.String(), m[2]); n != 1 {
		t.Errorf("the dev token is printed %d times:\n%s", n, out.String())
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
