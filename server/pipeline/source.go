package pipeline

import (
	"net/http"
	"net/netip"
	"strings"

	"renga.dev/renga/server/domain"
)

// resolveSource is the caller's address: the TCP peer, unless the peer is a trusted proxy; then
// X-Forwarded-For is walked from the right, skipping trusted proxies, to the first untrusted hop.
// text is the address's text as netip writes it when it is the peer's IPv4 address, taken from
// RemoteAddr without writing it again (an IPv4 address parses from one text only, the one String
// writes: no leading zeros, no zone); "" otherwise (sourceString writes it then).
func resolveSource(r *http.Request, trusted []netip.Prefix) (addr netip.Addr, text string) {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, ""
	}
	addr = peer.Addr().Unmap()
	if !isTrusted(addr, trusted) {
		if peer.Addr().Is4() {
			text = r.RemoteAddr[:strings.LastIndexByte(r.RemoteAddr, ':')]
		}
		return addr, text
	}
	hops := forwardedFor(r.Header.Values("X-Forwarded-For"))
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(hops[i])
		if err != nil {
			// A garbled hop cannot be trusted or attributed: stop at the last trusted one.
			return addr, ""
		}
		addr = hop.Unmap()
		if !isTrusted(addr, trusted) {
			return addr, ""
		}
	}
	return addr, ""
}

func forwardedFor(values []string) []string {
	var hops []string
	for _, v := range values {
		for _, h := range strings.Split(v, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hops = append(hops, h)
			}
		}
	}
	return hops
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// secureRequest reports whether the request reached the deployment over TLS: directly, or per
// X-Forwarded-Proto from a trusted proxy (the value the nearest proxy appended).
func secureRequest(r *http.Request, trusted []netip.Prefix) bool {
	if r.TLS != nil {
		return true
	}
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil || !isTrusted(peer.Addr().Unmap(), trusted) {
		return false
	}
	protos := forwardedFor(r.Header.Values("X-Forwarded-Proto"))
	return len(protos) > 0 && strings.EqualFold(protos[len(protos)-1], "https")
}

// sourceString is how logs and audit name the caller's address.
func sourceString(st *State) string {
	if st.Actor.Type == domain.ActorLocalOperator {
		return "local"
	}
	if !st.Source.IsValid() {
		return "unknown"
	}
	if st.sourceText != "" {
		return st.sourceText
	}
	return st.Source.String()
}
