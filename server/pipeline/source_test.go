package pipeline

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"testing"

	"renga.dev/renga/server/domain"
)

var testTrusted = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}

func TestResolveSource(t *testing.T) {
	tests := []struct {
		name    string
		remote  string
		xff     []string
		trusted []netip.Prefix
		want    string // "" for the invalid address
	}{
		{name: "untrusted peer", remote: "203.0.113.5:1234", want: "203.0.113.5"},
		{name: "untrusted peer, X-Forwarded-For ignored", remote: "203.0.113.5:1234", xff: []string{"198.51.100.7"}, trusted: testTrusted, want: "203.0.113.5"},
		{name: "no trusted proxies, X-Forwarded-For ignored", remote: "10.0.0.1:1234", xff: []string{"198.51.100.7"}, want: "10.0.0.1"},
		{name: "trusted peer, one hop", remote: "10.0.0.1:1234", xff: []string{"198.51.100.7"}, trusted: testTrusted, want: "198.51.100.7"},
		{name: "trusted peer, no X-Forwarded-For", remote: "10.0.0.1:1234", trusted: testTrusted, want: "10.0.0.1"},
		{name: "trusted peer, empty X-Forwarded-For", remote: "10.0.0.1:1234", xff: []string{" , "}, trusted: testTrusted, want: "10.0.0.1"},
		{name: "trusted hops skipped from the right", remote: "10.0.0.1:1234", xff: []string{"198.51.100.7, 10.0.0.3, 10.0.0.2"}, trusted: testTrusted, want: "198.51.100.7"},
		{name: "spoofed left hops ignored", remote: "10.0.0.1:1234", xff: []string{"1.1.1.1, 192.0.2.9, 198.51.100.7, 10.0.0.2"}, trusted: testTrusted, want: "198.51.100.7"},
		{name: "every hop trusted: the leftmost", remote: "10.0.0.1:1234", xff: []string{"10.0.0.3, 10.0.0.2"}, trusted: testTrusted, want: "10.0.0.3"},
		{name: "header lines joined in order", remote: "10.0.0.1:1234", xff: []string{"192.0.2.9, 198.51.100.7", "10.0.0.2"}, trusted: testTrusted, want: "198.51.100.7"},
		{name: "garbled nearest hop", remote: "10.0.0.1:1234", xff: []string{"198.51.100.7, garbage"}, trusted: testTrusted, want: "10.0.0.1"},
		{name: "garbled hop behind a trusted one", remote: "10.0.0.1:1234", xff: []string{"198.51.100.7, garbage, 10.0.0.2"}, trusted: testTrusted, want: "10.0.0.2"},
		{name: "garbled hop left of the client is never reached", remote: "10.0.0.1:1234", xff: []string{"garbage, 198.51.100.7"}, trusted: testTrusted, want: "198.51.100.7"},
		{name: "hop with a port is garbled", remote: "10.0.0.1:1234", xff: []string{"198.51.100.7:5555"}, trusted: testTrusted, want: "10.0.0.1"},
		{name: "IPv4-mapped trusted peer", remote: "[::ffff:10.0.0.1]:1234", xff: []string{"198.51.100.7"}, trusted: testTrusted, want: "198.51.100.7"},
		{name: "IPv4-mapped untrusted peer unmapped", remote: "[::ffff:203.0.113.5]:1234", trusted: testTrusted, want: "203.0.113.5"},
		{name: "IPv4-mapped hop unmapped", remote: "10.0.0.1:1234", xff: []string{"::ffff:198.51.100.7"}, trusted: testTrusted, want: "198.51.100.7"},
		{name: "IPv4-mapped trusted hop skipped", remote: "10.0.0.1:1234", xff: []string{"198.51.100.7, ::ffff:10.0.0.2"}, trusted: testTrusted, want: "198.51.100.7"},
		{name: "IPv6 peer and hops", remote: "[fd00::1]:443", xff: []string{"2001:db8::7, fd00::2"}, trusted: testTrusted, want: "2001:db8::7"},
		{name: "untrusted IPv6 peer", remote: "[2001:db8::1]:443", xff: []string{"198.51.100.7"}, trusted: testTrusted, want: "2001:db8::1"},
		{name: "no port", remote: "203.0.113.5", want: ""},
		{name: "garbled peer", remote: "garbage", trusted: testTrusted, want: ""},
		{name: "empty peer", remote: "", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/api/v1/x", nil)
			r.RemoteAddr = tt.remote
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			got, text := resolveSource(r, tt.trusted)
			if text != "" && text != tt.want {
				t.Errorf("text %q, want %q or none", text, tt.want)
			}
			if tt.want == "" {
				if got.IsValid() {
					t.Errorf("source = %s, want none", got)
				}
				return
			}
			if got != netip.MustParseAddr(tt.want) {
				t.Errorf("source = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestSecureRequest(t *testing.T) {
	tests := []struct {
		name   string
		remote string
		tls    bool
		proto  []string
		want   bool
	}{
		{name: "TLS directly", remote: "203.0.113.5:1234", tls: true, want: true},
		{name: "TLS directly, whatever the header says", remote: "203.0.113.5:1234", tls: true, proto: []string{"http"}, want: true},
		{name: "plain, untrusted peer", remote: "203.0.113.5:1234", want: false},
		{name: "untrusted peer claiming https", remote: "203.0.113.5:1234", proto: []string{"https"}, want: false},
		{name: "trusted peer, https", remote: "10.0.0.1:1234", proto: []string{"https"}, want: true},
		{name: "trusted peer, HTTPS", remote: "10.0.0.1:1234", proto: []string{"HTTPS"}, want: true},
		{name: "trusted peer, https with spaces", remote: "10.0.0.1:1234", proto: []string{" https "}, want: true},
		{name: "trusted peer, http", remote: "10.0.0.1:1234", proto: []string{"http"}, want: false},
		{name: "trusted peer, no header", remote: "10.0.0.1:1234", want: false},
		{name: "trusted peer, empty header", remote: "10.0.0.1:1234", proto: []string{""}, want: false},
		{name: "nearest proxy's value decides: http", remote: "10.0.0.1:1234", proto: []string{"https, http"}, want: false},
		{name: "nearest proxy's value decides: https", remote: "10.0.0.1:1234", proto: []string{"http, https"}, want: true},
		{name: "last header line decides", remote: "10.0.0.1:1234", proto: []string{"http", "https"}, want: true},
		{name: "not https", remote: "10.0.0.1:1234", proto: []string{"httpss"}, want: false},
		{name: "IPv4-mapped trusted peer", remote: "[::ffff:10.0.0.1]:1234", proto: []string{"https"}, want: true},
		{name: "trusted IPv6 peer", remote: "[fd00::1]:1234", proto: []string{"https"}, want: true},
		{name: "garbled peer", remote: "garbage", proto: []string{"https"}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/api/v1/x", nil)
			r.TLS = nil
			if tt.tls {
				r.TLS = &tls.ConnectionState{}
			}
			r.RemoteAddr = tt.remote
			for _, v := range tt.proto {
				r.Header.Add("X-Forwarded-Proto", v)
			}
			if got := secureRequest(r, testTrusted); got != tt.want {
				t.Errorf("secureRequest = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("no trusted proxies", func(t *testing.T) {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/x", nil)
		r.RemoteAddr = "10.0.0.1:1234"
		r.Header.Set("X-Forwarded-Proto", "https")
		if secureRequest(r, nil) {
			t.Error("secureRequest = true with no trusted proxy")
		}
	})
}

func TestForwardedFor(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   []string
	}{
		{name: "none", values: nil, want: nil},
		{name: "empty", values: []string{""}, want: nil},
		{name: "commas and spaces only", values: []string{" , ,, "}, want: nil},
		{name: "one", values: []string{"1.2.3.4"}, want: []string{"1.2.3.4"}},
		{name: "list trimmed", values: []string{" 1.2.3.4 ,5.6.7.8 "}, want: []string{"1.2.3.4", "5.6.7.8"}},
		{name: "empty entries skipped", values: []string{"1.2.3.4,,5.6.7.8,"}, want: []string{"1.2.3.4", "5.6.7.8"}},
		{name: "lines in order", values: []string{"a, b", "c"}, want: []string{"a", "b", "c"}},
		{name: "garbage kept for the caller to judge", values: []string{"unknown"}, want: []string{"unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := forwardedFor(tt.values); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("forwardedFor(%q) = %q, want %q", tt.values, got, tt.want)
			}
		})
	}
}

func TestSourceString(t *testing.T) {
	tests := []struct {
		name string
		st   State
		want string
	}{
		{name: "local operator", st: State{Actor: Actor{Type: domain.ActorLocalOperator}, Source: netip.MustParseAddr("127.0.0.1")}, want: "local"},
		{name: "local operator, no address", st: State{Actor: Actor{Type: domain.ActorLocalOperator}}, want: "local"},
		{name: "no address", st: State{Actor: Actor{Type: domain.ActorOperatorToken}}, want: "unknown"},
		{name: "unauthenticated, no address", st: State{}, want: "unknown"},
		{name: "IPv4", st: State{Actor: Actor{Type: domain.ActorUser}, Source: netip.MustParseAddr("198.51.100.7")}, want: "198.51.100.7"},
		{name: "IPv6", st: State{Actor: Actor{Type: domain.ActorIntakeKey}, Source: netip.MustParseAddr("2001:db8::7")}, want: "2001:db8::7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sourceString(&tt.st); got != tt.want {
				t.Errorf("sourceString = %q, want %q", got, tt.want)
			}
		})
	}
}

// FuzzSourceTextIsAddrsString holds resolveSource's text to netip's text of the address it
// resolves: empty, or the text String writes; and the text is given for an untrusted IPv4 peer.
func FuzzSourceTextIsAddrsString(f *testing.F) {
	for _, s := range []struct{ remote, xff string }{
		{"127.0.0.1:40000", ""}, {"203.0.113.5:1234", ""}, {"10.0.0.1:1234", "198.51.100.7"},
		{"10.0.0.1:1234", "10.0.0.1"}, {"[::ffff:203.0.113.5]:1234", ""}, {"[::1]:80", ""},
		{"[fe80::1%eth0]:80", ""}, {"01.2.3.4:5", ""}, {"1.2.3.4", ""}, {":80", ""}, {"", ""},
		{"1.2.3.4:", ""}, {"[1.2.3.4]:5", ""}, {"0.0.0.0:0", ""}, {"255.255.255.255:65535", ""},
	} {
		f.Add(s.remote, s.xff)
	}
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = remote
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		addr, text := resolveSource(r, testTrusted)
		if text != "" && text != addr.String() {
			t.Fatalf("resolveSource(%q): text %q, want %q", remote, text, addr.String())
		}
		if peer, err := netip.ParseAddrPort(remote); err == nil && peer.Addr().Is4() && !isTrusted(peer.Addr(), testTrusted) && text == "" {
			t.Fatalf("resolveSource(%q): no text for an untrusted IPv4 peer", remote)
		}
	})
}
