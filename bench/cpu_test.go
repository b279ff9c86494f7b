package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Throughput on two shared cores says little about where the time went, and moves with
// whatever else the machine runs. CPU time per request does not: it is what a request costs,
// whoever else is running. cpuMeter measures it for the two parties of a benchmark:
//
//   - pg-cpu-us/op: the PostgreSQL backends serving the benchmark's database (every
//     connection to it, read from /proc: PostgreSQL runs on this machine);
//   - go-cpu-us/op: this process, i.e. the server and the load generator together (they share
//     one process; BenchmarkBareHandler shows the load generator's share of an HTTP request).
//
// bench/run.sh prints the same for pgbench's backends, so the two are compared like for like:
// a request that costs PostgreSQL more CPU than the baseline's transaction cannot reach the
// baseline's rate on the same cores, whatever the server does.
type cpuMeter struct {
	pool     *pgxpool.Pool
	backends map[int]time.Duration
	self     time.Duration
}

// clockTick is the unit of /proc/<pid>/stat's utime and stime (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

func startCPU(b testing.TB, pool *pgxpool.Pool) *cpuMeter {
	// Every measured run starts right after a checkpoint, as each pgbench run in bench/run.sh
	// does: the first change of a page after a checkpoint writes the whole page to the WAL, so
	// a run that a checkpoint happened to precede by seconds or by minutes would cost the
	// database more or less per request for that reason alone.
	if _, err := pool.Exec(context.Background(), "CHECKPOINT"); err != nil {
		b.Fatal(err)
	}
	m := &cpuMeter{pool: pool}
	var err error
	if m.backends, err = backendCPU(pool); err != nil {
		b.Fatal(err)
	}
	m.self = selfCPU()
	return m
}

// report adds the CPU per operation since startCPU (n operations) to the benchmark's metrics.
func (m *cpuMeter) report(b *testing.B, n int) {
	pg, self := m.since(b, n)
	b.ReportMetric(pg, "pg-cpu-us/op")
	b.ReportMetric(self, "go-cpu-us/op")
}

// since is the CPU per operation, in microseconds, of the database's backends and of this
// process since startCPU (n operations). A backend that connected meanwhile counts from zero
// (its start-up is part of the run).
func (m *cpuMeter) since(tb testing.TB, n int) (pg, self float64) {
	now, err := backendCPU(m.pool)
	if err != nil {
		tb.Fatal(err)
	}
	var backends time.Duration
	for pid, t := range now {
		backends += t - m.backends[pid]
	}
	return float64(backends.Microseconds()) / float64(n), float64((selfCPU() - m.self).Microseconds()) / float64(n)
}

// backendCPU is the CPU time used so far by each PostgreSQL backend connected to the pool's
// database (this query's own backend included: it is one of the pool's, perhaps its only one).
func backendCPU(pool *pgxpool.Pool) (map[int]time.Duration, error) {
	rows, err := pool.Query(context.Background(),
		`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	if err != nil {
		return nil, err
	}
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return nil, err
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		t, err := procCPU(pid)
		if err != nil {
			if os.IsNotExist(err) {
				continue // it ended since the query
			}
			return nil, err
		}
		out[pid] = t
	}
	return out, nil
}

// procCPU reads a process's user and system time from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: the fields after it are counted
	// from its closing parenthesis (utime and stime are the 14th and 15th fields).
	s := string(raw)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %q %q", pid, f[11], f[12])
	}
	return time.Duration(utime+stime) * clockTick, nil
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestProcCPU checks the /proc parser against this process's own rusage: the two clocks
// differ in resolution (clock ticks against microseconds), not by more.
func TestProcCPU(t *testing.T) {
	for start := selfCPU(); selfCPU()-start < 200*time.Millisecond; { // burn CPU, so both clocks move
	}
	got, err := procCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want := selfCPU()
	if got > want+2*clockTick || got < want-5*clockTick || got < 150*time.Millisecond {
		t.Fatalf("/proc says %v, getrusage %v", got, want)
	}
}
