package agent_test

import (
	"context"
	"crypto/ed25519"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"renga.dev/renga/agent"
	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// The agent's side of a move, with real processes: two deployments (real servers, two
// databases), `renga resolver serve` mapping a to A, and `renga agent run` resolving through
// it with an intake key from A. The organization's installation is then made to exist at B
// with the same ID and public key (what RFD 20's import carries; transfers build the real
// archive), and A's organization is marked moved. While the resolver still answers A, the
// agent backs off; after the map points a at B and the resolver gets SIGHUP, the agent
// continues at B with the same installation ID and without its intake key. The agent is killed
// with SIGKILL twelve times along the way. Every observation is at A (before the move) or B
// (after), exactly once.
func TestAgentFollowsAMoveThroughTheResolver(t *testing.T) {
	t.Parallel()
	bin := rengaBinary(t)
	ctx := context.Background()
	deploymentID := func(id string) servertest.Option { return func(c *server.Config) { c.DeploymentID = id } }
	a := servertest.Start(t, servertest.WithOwnPublicURL(), deploymentID("a"))
	b := servertest.Start(t, servertest.WithOwnPublicURL(), deploymentID("b"))
	orgA, err := domain.CreateOrganization(ctx, a.Pool, "moving", "Moving")
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := domain.CreateIntakeKey(ctx, a.Pool, orgA.ID, "hosts", "a")
	if err != nil {
		t.Fatal(err)
	}
	a.Track(key)
	b.Track(key)

	dir := t.TempDir()
	mapFile := filepath.Join(dir, "resolver.yaml")
	writeFile(t, mapFile, "deployments:\n  a: "+a.URL+"\n  b: "+b.URL+"\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resolverAddr := ln.Addr().String()
	_ = ln.Close()
	resolverLog := &syncWriter{}
	res := exec.Command(bin, "resolver", "serve", "--listen", resolverAddr, "--map", mapFile)
	res.Stderr = resolverLog
	if err := res.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = res.Process.Kill(); _ = res.Wait() })
	eventually(t, "the resolver listening", func() bool { return strings.Contains(resolverLog.String(), "resolver listening") })

	state := filepath.Join(dir, "state")
	config := filepath.Join(dir, "agent.yaml")
	writeFile(t, config, "renga_url: http://"+resolverAddr+"\nintake_key: "+key+"\nstate_dir: "+state+
		"\nallow_insecure_http: true\ninterval: 100ms\n")
	p := startAgentProcess(t, bin, config)
	var installationID string
	eventually(t, "observations at A", func() bool {
		id, err := agent.LoadIdentity(state)
		if err != nil {
			return false
		}
		installationID = id.InstallationID
		return len(sequencesAt(t, a, installationID)) >= 5
	})
	// Killed at random points before the move.
	p = killAndRestart(t, p, bin, config, 5)
	identity, err := agent.LoadIdentity(state)
	if err != nil || identity.InstallationID != installationID {
		t.Fatalf("identity after restarts: %v %v", identity.InstallationID, err)
	}

	// The import at B: the organization and its installation with the same public key.
	orgB, err := domain.CreateOrganization(ctx, b.Pool, "moving", "Moving")
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := identity.Key.Public().(ed25519.PublicKey)
	if _, _, err := domain.RegisterInstallation(ctx, b.Pool, orgB.ID, "", domain.Installation{ID: installationID, PublicKey: pub,
		Hostname: "imported", OS: "linux"}, domain.BuiltinDefaults); err != nil {
		t.Fatal(err)
	}
	// Completing the move at A.
	if _, err := a.Pool.Exec(ctx, `UPDATE organizations SET state = 'moved' WHERE id = $1`, orgA.ID); err != nil {
		t.Fatal(err)
	}
	// The resolver still answers A for four seconds: the agent backs off, no hot loop.
	homeRequests := func() int { return strings.Count(resolverLog.String(), `"deployment":"a"`) }
	before := homeRequests()
	time.Sleep(4 * time.Second)
	if n := homeRequests() - before; n < 1 || n > 6 {
		t.Errorf("%d home requests in 4 s while the resolver answered the moved home (back-off from 1 s)", n)
	}
	// The killed agent starts again in the middle of it all.
	p.signal(t, syscall.SIGKILL)
	p = startAgentProcess(t, bin, config)

	// A bad map on SIGHUP keeps the previous one, and the log says why.
	writeFile(t, mapFile, "deployments:\n  a: not a URL\n")
	if err := res.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bad map refused", func() bool {
		return strings.Contains(resolverLog.String(), "map not reloaded: keeping the previous one")
	})

	writeFile(t, mapFile, "deployments:\n  a: "+b.URL+"\n  b: "+b.URL+"\n")
	if err := res.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the map reloaded", func() bool { return strings.Contains(resolverLog.String(), `"msg":"map reloaded"`) })
	eventually(t, "observations at B", func() bool { return len(sequencesAt(t, b, installationID)) >= 5 })
	// Killed at random points after the move.
	p = killAndRestart(t, p, bin, config, 5)
	atB := len(sequencesAt(t, b, installationID))
	eventually(t, "more observations at B after a restart", func() bool { return len(sequencesAt(t, b, installationID)) > atB+3 })
	p.signal(t, syscall.SIGTERM)

	if h, err := agent.LoadHome(state); err != nil || h.Home != b.URL {
		t.Errorf("home after the move: %+v %v", h, err)
	}
	if !strings.Contains(p.stderr.String(), `"home":"`+b.URL) {
		t.Errorf("the last run does not log B as its home:\n%s", p.stderr.String())
	}
	exactlyOnce(t, append(sequencesAt(t, a, installationID), sequencesAt(t, b, installationID)...), state)
	// B never saw an intake key (its log would show the registration attempt) nor a new
	// installation: the one the import carried is the only one.
	var n int
	if err := b.Pool.QueryRow(ctx, `SELECT count(*) FROM installations`).Scan(&n); err != nil || n != 1 {
		t.Errorf("installations at B: %d %v", n, err)
	}
	if strings.Contains(b.Logs.String(), "/api/v1/agent/installations") {
		t.Errorf("the agent tried to register at B")
	}
}

// killAndRestart kills the agent with SIGKILL n times, each after a random 200-700 ms, and
// returns the process running after the last.
func killAndRestart(t *testing.T, p *agentProcess, bin, config string, n int) *agentProcess {
	t.Helper()
	for range n {
		time.Sleep(time.Duration(200+rand.IntN(500)) * time.Millisecond)
		p.signal(t, syscall.SIGKILL)
		p = startAgentProcess(t, bin, config)
	}
	return p
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// syncWriter is a process's stderr, read while it runs.
type syncWriter struct{ servertest.SyncBuffer }
