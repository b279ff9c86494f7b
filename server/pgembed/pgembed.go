// Package pgembed runs a private PostgreSQL cluster from the machine's own binaries: the embedded
// default of `renga serve --dev` and the test launcher. As root it runs PostgreSQL as the
// unprivileged "postgres" user, since PostgreSQL refuses to run as root.
package pgembed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Options tunes a cluster.
type Options struct {
	// Fast turns off durability (fsync, synchronous commit, full-page writes): tests only.
	Fast bool
	// Port names the unix socket (.s.PGSQL.<port>); 0 means 5432. No TCP port is opened.
	Port int
}

// socketPathMax is the longest unix socket path the kernel accepts (sun_path).
const socketPathMax = 107

// Cluster is a running private PostgreSQL.
type Cluster struct {
	Dir    string // data directory
	RunDir string // socket and log directory
	Port   int
	bin    string
	runAs  string // user to run as, or "" for the current user
}

// URL is a connection URL for database name, over the cluster's unix socket: the cluster
// listens on no TCP port, so only local users who can reach the socket directory connect.
func (c *Cluster) URL(database string) string {
	return fmt.Sprintf("postgres:///%s?host=%s&port=%d&user=postgres&sslmode=disable", database, c.RunDir, c.Port)
}

// BinDir finds the directory of the newest installed PostgreSQL's server binaries.
func BinDir() (string, error) {
	if out, err := exec.Command("pg_config", "--bindir").Output(); err == nil {
		dir := strings.TrimSpace(string(out))
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(matches, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[j]))))
		return vi > vj
	})
	if len(matches) == 0 {
		return "", errors.New("no PostgreSQL server binaries found (looked for pg_config and /usr/lib/postgresql/*/bin/initdb); install the postgresql package")
	}
	return filepath.Dir(matches[0]), nil
}

// Start initializes dir when it holds no cluster yet, then starts PostgreSQL on it.
func Start(ctx context.Context, dir string, opts Options) (*Cluster, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: filepath.Join(dir, "data"), RunDir: filepath.Join(dir, "run"), bin: bin}
	if os.Geteuid() == 0 {
		c.runAs = "postgres"
	}
	for _, d := range []string{dir, c.Dir, c.RunDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	if c.runAs != "" {
		u, err := user.Lookup(c.runAs)
		if err != nil {
			return nil, fmt.Errorf("running as root needs the unprivileged %q user: %w", c.runAs, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{dir, c.Dir, c.RunDir} {
			if err := os.Chown(d, uid, gid); err != nil {
				return nil, err
			}
		}
		// The postgres user must be able to reach the directory.
		for p := filepath.Dir(dir); p != "/"; p = filepath.Dir(p) {
			if fi, err := os.Stat(p); err == nil && fi.Mode().Perm()&0o001 == 0 {
				if err := os.Chmod(p, fi.Mode().Perm()|0o011); err != nil {
					return nil, fmt.Errorf("make %s reachable for PostgreSQL: %w", p, err)
				}
			}
		}
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := c.run(ctx, "initdb", "-D", c.Dir, "-U", "postgres", "--auth=trust", "-E", "UTF8",
			"--locale=C.UTF-8", "--no-sync"); err != nil {
			return nil, err
		}
	}
	// The port only names the socket file: each cluster has its own socket directory.
	c.Port = opts.Port
	if c.Port == 0 {
		c.Port = 5432
	}
	if sock := filepath.Join(c.RunDir, fmt.Sprintf(".s.PGSQL.%d", c.Port)); len(sock) > socketPathMax {
		return nil, fmt.Errorf("the socket path %s is longer than %d bytes: use a shorter data directory", sock, socketPathMax)
	}
	settings := fmt.Sprintf("-p %d -k %s -c listen_addresses='' -c max_connections=300", c.Port, c.RunDir)
	if opts.Fast {
		settings += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	// A running cluster belongs to another process: never take it over or stop it. (A stale
	// postmaster.pid from a killed process is handled by pg_ctl start itself.)
	if _, err := os.Stat(filepath.Join(c.Dir, "postmaster.pid")); err == nil {
		if c.run(ctx, "pg_ctl", "-D", c.Dir, "status") == nil {
			return nil, fmt.Errorf("the PostgreSQL in %s is already running: another process (a second `renga serve --dev`?) uses this data directory", c.Dir)
		}
	}
	if err := c.run(ctx, "pg_ctl", "-D", c.Dir, "-l", filepath.Join(c.RunDir, "postgres.log"), "-w",
		"-t", "60", "-o", settings, "start"); err != nil {
		return nil, err
	}
	return c, nil
}

// Stop shuts the cluster down.
func (c *Cluster) Stop() error {
	return c.run(context.Background(), "pg_ctl", "-D", c.Dir, "-m", "fast", "-w", "stop")
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	path := filepath.Join(c.bin, name)
	var cmd *exec.Cmd
	if c.runAs != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", c.runAs, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = c.RunDir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.RunDir, "postgres.log"))
		return fmt.Errorf("%s: %w\n%s%s", name, err, out.String(), tail(log, 2000))
	}
	return nil
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
