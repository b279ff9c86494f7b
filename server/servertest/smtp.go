package servertest

import (
	"bufio"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Mail is one message an SMTPCapture received.
type Mail struct {
	From string
	To   []string
	Data string // the message as sent: headers and body
}

// SMTPCapture is a minimal SMTP server on loopback that keeps what it receives: enough of
// RFC 5321 for Go's net/smtp client (EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT).
type SMTPCapture struct {
	ln   net.Listener
	mu   sync.Mutex
	mail []Mail
	cond *sync.Cond
}

// NewSMTPCapture starts a capture server that stops when t ends.
func NewSMTPCapture(t testing.TB) *SMTPCapture {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &SMTPCapture{ln: ln}
	c.cond = sync.NewCond(&c.mu)
	go c.serve()
	t.Cleanup(func() { _ = ln.Close() })
	return c
}

// URL is the RENGA_SMTP_URL of the capture server.
func (c *SMTPCapture) URL() *url.URL {
	return &url.URL{Scheme: "smtp", Host: c.ln.Addr().String()}
}

// Wait returns once n messages arrived, or fails t after timeout.
func (c *SMTPCapture) Wait(t testing.TB, n int, timeout time.Duration) []Mail {
	t.Helper()
	deadline := time.Now().Add(timeout)
	go func() { time.Sleep(timeout); c.cond.Broadcast() }()
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.mail) < n {
		if time.Now().After(deadline) {
			t.Fatalf("SMTP capture: %d messages after %s, want %d", len(c.mail), timeout, n)
		}
		c.cond.Wait()
	}
	return append([]Mail(nil), c.mail...)
}

func (c *SMTPCapture) serve() {
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return
		}
		go c.session(conn)
	}
}

func (c *SMTPCapture) session(conn net.Conn) {
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	r := bufio.NewReader(conn)
	reply := func(format string, args ...any) { fmt.Fprintf(conn, format+"\r\n", args...) }
	reply("220 renga-test ESMTP")
	var m Mail
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\r\n")
		verb := strings.ToUpper(strings.SplitN(line, " ", 2)[0])
		switch verb {
		case "EHLO":
			reply("250-renga-test\r\n250 8BITMIME")
		case "HELO", "NOOP":
			reply("250 ok")
		case "MAIL":
			m = Mail{From: addr(line)}
			reply("250 ok")
		case "RCPT":
			m.To = append(m.To, addr(line))
			reply("250 ok")
		case "DATA":
			reply("354 go ahead")
			var b strings.Builder
			for {
				l, err := r.ReadString('\n')
				if err != nil {
					return
				}
				if l == ".\r\n" || l == ".\n" {
					break
				}
				b.WriteString(strings.TrimPrefix(l, "."))
			}
			m.Data = b.String()
			c.mu.Lock()
			c.mail = append(c.mail, m)
			c.mu.Unlock()
			c.cond.Broadcast()
			reply("250 queued")
		case "RSET":
			m = Mail{}
			reply("250 ok")
		case "QUIT":
			reply("221 bye")
			return
		default:
			reply("502 not implemented")
		}
	}
}

func addr(line string) string {
	if i, j := strings.Index(line, "<"), strings.LastIndex(line, ">"); i >= 0 && j > i {
		return line[i+1 : j]
	}
	return ""
}
