package server

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// unreachableError is a provider whose discovery document could not be fetched when the
// cached one was no longer fresh: sign-in fails closed.
type unreachableError struct {
	issuer string
	err    error
}

func (e *unreachableError) Error() string {
	return "identity provider " + e.issuer + " unreachable: " + e.err.Error()
}
func (e *unreachableError) Unwrap() error { return e.err }

// discovery caches each issuer's discovery document and keys (go-oidc's Provider, whose key
// set fetches the JWKS on first use) for at most its freshness. A stale entry is never used:
// it is fetched again, and if that fails the sign-in fails.
type discovery struct {
	freshness time.Duration
	client    *http.Client
	mu        sync.Mutex
	entries   map[string]discovered
}

type discovered struct {
	provider *oidc.Provider
	at       time.Time
}

func newDiscovery(freshness time.Duration) *discovery {
	if freshness <= 0 {
		freshness = DefaultProviderCacheFreshness
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: boundedResponses{http.DefaultTransport}}
	return &discovery{freshness: freshness, client: client, entries: map[string]discovered{}}
}

// maxIssuerResponseBytes bounds each answer of an issuer the server reads (discovery, keys,
// tokens), decompressed: an owner names the issuer, which can be anyone's. oauth2 reads a token
// response to this bound itself; go-oidc reads the others whole.
const maxIssuerResponseBytes = 1 << 20

// boundedResponses is a transport whose answers' bodies end in an error past
// maxIssuerResponseBytes (after net/http's own gzip decoding, which it asks for by default).
type boundedResponses struct{ next http.RoundTripper }

func (b boundedResponses) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := b.next.RoundTrip(r)
	if err == nil {
		resp.Body = http.MaxBytesReader(nil, resp.Body, maxIssuerResponseBytes)
	}
	return resp, err
}

func (d *discovery) clientContext(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, d.client)
}

func (d *discovery) provider(ctx context.Context, issuer string) (*oidc.Provider, error) {
	d.mu.Lock()
	e, ok := d.entries[issuer]
	d.mu.Unlock()
	if ok && time.Since(e.at) < d.freshness {
		return e.provider, nil
	}
	// The key set keeps the client of this context, not its deadline.
	p, err := oidc.NewProvider(d.clientContext(ctx), issuer)
	if err != nil {
		d.mu.Lock()
		delete(d.entries, issuer)
		d.mu.Unlock()
		return nil, &unreachableError{issuer: issuer, err: err}
	}
	d.mu.Lock()
	d.entries[issuer] = discovered{provider: p, at: time.Now()}
	d.mu.Unlock()
	return p, nil
}
