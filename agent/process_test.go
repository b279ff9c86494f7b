package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"renga.dev/renga/agent"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// The agent as a process against a real server and PostgreSQL: its observations arrive
// exactly once although it is killed with SIGKILL again and again mid-run, it registers once
// and keeps its installation ID, runs its jobs, and `renga agent status` reports it.

var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "renga-agent-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "renga")
	cmd := exec.Command("go", "build", "-o", bin, "renga.dev/renga/cmd/renga")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", &buildError{out: string(out), err: err}
	}
	return bin, nil
})

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// rengaBinary builds cmd/renga once per test process.
func rengaBinary(t *testing.T) string {
	t.Helper()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// agentProcess is `renga agent run` as a child process.
type agentProcess struct {
	cmd    *exec.Cmd
	stderr *syncWriter
	done   chan struct{}
}

func startAgentProcess(t *testing.T, bin, config string) *agentProcess {
	t.Helper()
	p := &agentProcess{stderr: &syncWriter{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "agent", "run", "--config", config, "--log-level", "debug")
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.done })
	return p
}

func (p *agentProcess) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("the agent did not exit on %v:\n%s", sig, p.stderr.String())
	}
}

func sequencesAt(t *testing.T, env *servertest.Env, installationID string) []int {
	t.Helper()
	rows, err := env.Pool.Query(context.Background(),
		`SELECT (data->>'sequence')::int FROM observations WHERE installation_id = $1 ORDER BY 1`, installationID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var s int
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func TestAgentProcessExactlyOnceThroughKills(t *testing.T) {
	t.Parallel()
	bin := rengaBinary(t)
	env := servertest.Start(t, servertest.WithOwnPublicURL())
	ctx := context.Background()
	org, err := domain.CreateOrganization(ctx, env.Pool, "agents", "Agents")
	if err != nil {
		t.Fatal(err)
	}
	_, key, err := domain.CreateIntakeKey(ctx, env.Pool, org.ID, "hosts", "t1")
	if err != nil {
		t.Fatal(err)
	}
	env.Track(key)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	keyFile := filepath.Join(dir, "intake-key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "agent.yaml")
	yaml := "renga_url: " + env.URL + "\nintake_key_file: " + keyFile + "\nstate_dir: " + state +
		"\nallow_insecure_http: true\ninterval: 100ms\nqueue_max_bytes: 8388608\n"
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}

	// Killed at random points, ten times. The first run's kill may come before the agent made
	// its identity (a process can take longer to start than the delay on a busy machine); the
	// other runs' delays start once the agent has started, from the fourth run on once it has
	// an identity, and the sixth's once a batch arrived, so that most kills land on an agent
	// registering or sending.
	var installationID string
	jobsQueued := false
	// queueJobs gives the installation two jobs once it is registered.
	queueJobs := func() bool {
		if jobsQueued || installationID == "" {
			return jobsQueued
		}
		var registered bool
		if err := env.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM installations WHERE id = $1)`, installationID).Scan(&registered); err != nil {
			t.Fatal(err)
		}
		if !registered {
			return false
		}
		for _, command := range []string{"facts", "rm -rf /"} {
			if _, err := domain.CreateJob(ctx, env.Pool, org.ID, installationID, command, domain.BuiltinDefaults); err != nil {
				t.Fatalf("job %q: %v", command, err)
			}
		}
		jobsQueued = true
		return true
	}
	for i := range 10 {
		p := startAgentProcess(t, bin, config)
		if i >= 1 {
			eventually(t, "the agent started", func() bool { return strings.Contains(p.stderr.String(), `"msg":"agent starting"`) })
		}
		if installationID == "" && i >= 3 {
			eventually(t, "the agent's identity", func() bool { _, err := agent.LoadIdentity(state); return err == nil })
		}
		if i == 5 && installationID != "" { // half the kills after something arrived
			eventually(t, "a batch arriving", func() bool { return len(sequencesAt(t, env, installationID)) > 0 })
		}
		time.Sleep(time.Duration(150+rand.IntN(600)) * time.Millisecond)
		p.signal(t, syscall.SIGKILL)
		id, err := agent.LoadIdentity(state)
		switch {
		case errors.Is(err, fs.ErrNotExist) && installationID == "":
			continue // killed before it made its identity
		case err != nil:
			t.Fatalf("run %d: %v\n%s", i, err, p.stderr.String())
		}
		if installationID != "" && id.InstallationID != installationID {
			t.Fatalf("the installation ID changed from %s to %s", installationID, id.InstallationID)
		}
		installationID = id.InstallationID
		if i >= 2 {
			queueJobs() // from the third run on, once registered: later runs fetch and run them
		}
	}
	if got := sequencesAt(t, env, installationID); len(got) == 0 {
		t.Fatal("nothing arrived while the agent was being killed")
	}

	// A last run that ends gracefully once the queue has drained.
	lastRun := time.Now()
	p := startAgentProcess(t, bin, config)
	eventually(t, "the last run started", func() bool { return strings.Contains(p.stderr.String(), `"msg":"agent starting"`) })
	eventually(t, "the installation registered, with its jobs", queueJobs)
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := exec.Command(bin, "-o", "json", "agent", "status", "--config", config).Output()
		if err != nil {
			t.Fatalf("agent status: %v %s", err, out)
		}
		var s agent.Status
		if err := json.Unmarshal(out, &s); err != nil {
			t.Fatalf("agent status output %q: %v", out, err)
		}
		if s.InstallationID != installationID || s.Home != env.URL || !s.Registered {
			t.Fatalf("agent status: %+v", s)
		}
		// While the agent runs, status reads the numbers it leaves in status.json.
		if s.Depth == 0 && s.LastSend.After(lastRun) && !s.AsOf.IsZero() && len(sequencesAt(t, env, installationID)) > 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the queue did not drain: %+v\n%s", s, p.stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.signal(t, syscall.SIGTERM)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM:\n%s", code, p.stderr.String())
	}

	exactlyOnce(t, sequencesAt(t, env, installationID), state)
	var installations int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM installations WHERE organization_id = $1`, org.ID).Scan(&installations); err != nil {
		t.Fatal(err)
	}
	if installations != 1 {
		t.Errorf("%d installations registered, want 1", installations)
	}
	// The jobs ran: the built-in one succeeded, the shell command was refused.
	jobs, err := domain.ListJobs(ctx, env.Pool, org.ID, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 2 {
		t.Fatalf("jobs: %+v", jobs)
	}
	for _, j := range jobs {
		want := map[string]string{"facts": "succeeded", "rm -rf /": "failed"}[j.Command]
		if j.State != want || (j.Command == "rm -rf /" && !strings.Contains(string(j.Result), `"exit_code": 127`) && !strings.Contains(string(j.Result), `"exit_code":127`)) {
			t.Errorf("job %q: state %s result %s", j.Command, j.State, j.Result)
		}
	}
}

// queuedSequences empties a stopped agent's queue and returns the sequences it held (some may
// have arrived already: a batch sent but whose 202 was not recorded before the agent stopped).
func queuedSequences(t *testing.T, state string) []int {
	t.Helper()
	q, err := agent.OpenQueue(state, agent.DefaultQueueMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var out []int
	for {
		b, ok, err := q.NextBatch()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		for _, o := range b.Observations {
			var v struct {
				Data struct{ Sequence int } `json:"data"`
			}
			if err := json.Unmarshal(o, &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v.Data.Sequence)
		}
		if err := q.Sent(b, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
}

// exactlyOnce checks that the arrived sequences have no duplicate, and that with those still
// queued they are 1..produced: nothing lost, nothing twice.
func exactlyOnce(t *testing.T, arrived []int, state string) {
	t.Helper()
	st, err := agent.ReadQueueStats(state)
	if err != nil {
		t.Fatal(err)
	}
	if st.Dropped != 0 || st.Rejected != 0 {
		t.Errorf("dropped %d, rejected %d", st.Dropped, st.Rejected)
	}
	produced := int(st.NextSequence - 1)
	seen := map[int]bool{}
	for _, s := range arrived {
		if seen[s] {
			t.Errorf("sequence %d arrived twice", s)
		}
		if s < 1 || s > produced {
			t.Errorf("sequence %d arrived, of %d produced", s, produced)
		}
		seen[s] = true
	}
	queued := queuedSequences(t, state)
	for _, s := range queued {
		seen[s] = true
	}
	for s := 1; s <= produced; s++ {
		if !seen[s] {
			t.Errorf("sequence %d was lost (%d produced, %d arrived, %d still queued)", s, produced, len(arrived), len(queued))
		}
	}
	t.Logf("%d produced, %d arrived, %d still queued", produced, len(arrived), len(queued))
}
