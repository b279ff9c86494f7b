package apitest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/servertest"
)

// serveWith runs the deployment as `renga serve` does (server.Run) on env's database, with the
// given connection timeouts; it returns the address.
func serveWith(t *testing.T, env *servertest.Env, timeouts server.HTTPTimeouts) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := env.Config
	cfg.HTTP = timeouts
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg, env.Pool, slog.New(slog.NewTextHandler(io.Discard, nil)), ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server.Run: %v", err)
		}
	})
	return ln.Addr().String()
}

// closedWithin reports whether the server closes conn within d (reading whatever it sends).
func closedWithin(conn net.Conn, d time.Duration) (bool, string) {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false, string(got)
	}
	return true, string(got)
}

// TestSlowClientsAreCut: a client that sends its headers or its body too slowly is cut off
// at the connection timeouts, changes nothing, and others are served meanwhile.
func TestSlowClientsAreCut(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	token := env.Token(t, "organizations:write")
	addr := serveWith(t, env, server.HTTPTimeouts{Header: 300 * time.Millisecond, Read: 600 * time.Millisecond,
		Write: 5 * time.Second, Idle: 5 * time.Second})

	trickle := func(conn net.Conn, stop <-chan struct{}) {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := conn.Write([]byte("a")); err != nil {
					return
				}
			}
		}
	}

	t.Run("headers", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprint(conn, "GET /api/v1/operator/organizations HTTP/1.1\r\nHost: x\r\nX-Slow: ")
		stop := make(chan struct{})
		defer close(stop)
		go trickle(conn, stop)
		if closed, got := closedWithin(conn, 3*time.Second); !closed {
			t.Errorf("a client trickling its headers is still connected after 3s (header timeout 300ms); it got %q", got)
		}
	})

	t.Run("body", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		slug := newSlug()
		body := `{"slug": "` + slug + `", "display_name": "Slow"}`
		fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
			"Idempotency-Key: %s\r\nContent-Length: %d\r\n\r\n%s", orgsPath, token, newKey(), len(body)+1000, body[:5])
		stop := make(chan struct{})
		defer close(stop)
		go trickle(conn, stop)
		if closed, got := closedWithin(conn, 3*time.Second); !closed {
			t.Errorf("a client trickling its body is still connected after 3s (read timeout 600ms); it got %q", got)
		} else if got != "" && !strings.Contains(got, "application/problem+json") {
			t.Errorf("the answer to a cut body is not problem+json: %q", got)
		}
		var n int
		if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM organizations WHERE slug = $1`, slug).Scan(&n); err != nil || n != 0 {
			t.Errorf("organizations with the slow request's slug: %d, %v", n, err)
		}
	})

	// The process serves the next client normally.
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz after the slow clients: %v %v", err, resp)
	}
	resp.Body.Close()
}
