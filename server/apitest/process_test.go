package apitest

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"renga.dev/renga/server/servertest"
)

// The real `renga serve` binary as a process of its own: the tests of several processes on one
// database, restarts, and SIGKILL.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// rengaBinary builds the renga command once per test run.
func rengaBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "renga-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "renga")
		out, err := exec.Command("go", "build", "-o", binPath, "renga.dev/renga/cmd/renga").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// freeAddr is a loopback address nothing listens on (at the moment it is returned).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// process is one `renga serve` process.
type process struct {
	URL     string
	DataDir string
	logs    *servertest.SyncBuffer
	cmd     *exec.Cmd
	stop    func() // SIGINT, then waits for the process to exit (at most 20 s); once
}

// kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *process) kill() error {
	err := p.cmd.Process.Kill()
	p.stop()
	return err
}

// startProcess runs `renga serve` on env's database as its own process, and waits until it
// answers.
func startProcess(t *testing.T, env *servertest.Env, extra ...string) *process {
	t.Helper()
	return startProcessOn(t, env.DBURL, extra...)
}

// startProcessOn runs `renga serve` on the database at dbURL, with a data directory of its own.
func startProcessOn(t *testing.T, dbURL string, extra ...string) *process {
	t.Helper()
	return startServe(t, dbURL, t.TempDir(), extra...)
}

// startServe runs `renga serve` on the database at dbURL with dataDir as its data directory (a
// process started again on the same directory finds what the last one left there), with the
// extra environment variables, and waits until it answers. The test's end stops it.
func startServe(t *testing.T, dbURL, dataDir string, extra ...string) *process {
	t.Helper()
	addr := freeAddr(t)
	p := &process{URL: "http://" + addr, DataDir: dataDir, logs: &servertest.SyncBuffer{}}
	cmd := exec.Command(rengaBinary(t), "serve")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"RENGA_ENV=development", "RENGA_LISTEN=" + addr, "RENGA_PUBLIC_URL=" + p.URL,
		"RENGA_DATABASE_URL=" + dbURL, "RENGA_DATA_DIR=" + p.DataDir,
		"RENGA_SECRET_KEY=" + strings.Repeat("A", 43) + "=", "RENGA_PURGE_INTERVAL=1s", "RENGA_DELETION_GRACE_PERIOD=0s",
		"RENGA_RATE_LIMIT_AUTHENTICATED=100000", "RENGA_RATE_LIMIT_AUTHENTICATED_BURST=100000"}, extra...)
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.cmd = cmd
	p.stop = sync.OnceFunc(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("renga serve did not stop on SIGINT: %s", p.logs.String())
		}
	})
	t.Cleanup(p.stop)
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(p.URL + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("renga serve did not become ready: %v: %s", err, p.logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
