package bench

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rengaagent "renga.dev/renga/agent"
)

// TestAgentFootprint measures the agent process offline with 100,000 observations queued: its
// resident memory (VmRSS, and the peak VmHWM) and the CPU it uses while idle (utime+stime over
// 20 s, while its home is unreachable and it backs off). Run with RENGA_LOAD=1 (bench/run.sh
// does); the target is RSS ≤ 25 MiB and idle CPU ≈ 0, for the agent's own program
// (cmd/renga-agent). The same agent run as `renga agent run`, from the one binary that also
// links the server, is measured beside it and reported only.
func TestAgentFootprint(t *testing.T) {
	if os.Getenv("RENGA_LOAD") == "" {
		t.Skip("load script: set RENGA_LOAD=1")
	}
	dir := t.TempDir()
	bin, agentBin := filepath.Join(dir, "renga"), filepath.Join(dir, "renga-agent")
	for out, pkg := range map[string]string{bin: "renga.dev/renga/cmd/renga", agentBin: "renga.dev/renga/cmd/renga-agent"} {
		if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v %s", pkg, err, b)
		}
	}
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	q, err := rengaagent.OpenQueue(state, rengaagent.DefaultQueueMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	host := map[string]any{"hostname": "bench-host", "os": "linux", "kernel_version": "6.1.0", "uptime_seconds": 123456,
		"cpu_count": 8, "memory_total_bytes": 16 << 30, "addresses": []string{"192.0.2.10/24", "2001:db8::10/64"}}
	for range 100 {
		data := make([]map[string]any, 1000)
		for i := range data {
			data[i] = host
		}
		if dropped, err := q.AddMany(rengaagent.HostFactsKind, time.Now(), data); err != nil || dropped != 0 {
			t.Fatalf("queue: dropped %d, %v", dropped, err)
		}
	}
	st, _ := q.Stats()
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "agent.yaml")
	// Port 9 on loopback refuses connections: the agent is offline and backs off.
	yaml := "renga_url: http://127.0.0.1:9\nintake_key: renga_intake_bench_x\nstate_dir: " + state + "\nallow_insecure_http: true\ninterval: 1m\n"
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, program := range []struct {
		name   string
		args   []string
		target bool
	}{
		{"renga-agent", []string{agentBin, "--config", config}, true},
		{"renga agent run", []string{bin, "agent", "run", "--config", config}, false},
	} {
		cmd := exec.Command(program.args[0], program.args[1:]...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second) // start-up: identity, queue, first collection, first failures
		cpu0 := cpuTicks(t, cmd.Process.Pid)
		const idle = 20 * time.Second
		time.Sleep(idle)
		cpu1 := cpuTicks(t, cmd.Process.Pid)
		rss, hwm := memory(t, cmd.Process.Pid, "VmRSS"), memory(t, cmd.Process.Pid, "VmHWM")
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		cpuPct := float64(cpu1-cpu0) / 100 / idle.Seconds() * 100 // USER_HZ is 100 on Linux
		t.Logf("agent-footprint: program=%q queued=%d queue_bytes=%d rss_kib=%d peak_rss_kib=%d idle_cpu_percent=%.3f",
			program.name, st.Depth, st.Bytes, rss, hwm, cpuPct)
		if program.target && rss > 25<<10 {
			t.Errorf("%s: RSS %d KiB over 25 MiB", program.name, rss)
		}
		if program.target && cpuPct > 1 {
			t.Errorf("%s: idle CPU %.2f%%", program.name, cpuPct)
		}
		if !strings.Contains(stderr.String(), "request failed") {
			t.Errorf("%s: the agent was not offline:\n%s", program.name, stderr.String())
		}
	}
}

// cpuTicks is a process's utime+stime in clock ticks (/proc/PID/stat fields 14 and 15).
func cpuTicks(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	u, _ := strconv.ParseInt(fields[11], 10, 64)
	s, _ := strconv.ParseInt(fields[12], 10, 64)
	return u + s
}

// memory reads a kB line of /proc/PID/status.
func memory(t *testing.T, pid int, name string) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", name, pid)
	return 0
}
