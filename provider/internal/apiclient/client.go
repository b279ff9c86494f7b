// Package apiclient is the provider's way to the Renga operator API: the generated client
// (gen/client) behind a transport that retries transient failures, deterministic
// Idempotency-Keys, and problem bodies turned into Terraform diagnostics.
package apiclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"renga.dev/renga/gen/client"
)

// TokenPrefix starts every operator token.
const TokenPrefix = "renga_operator_"

// Client is what the provider hands to its resources and data sources.
type Client struct {
	// API is the generated client; every call goes through it.
	API *client.ClientWithResponses
	// URL is the deployment's base URL, as configured.
	URL string
}

// Config is how to reach a deployment.
type Config struct {
	URL       string
	Token     string
	UserAgent string
	Retry     RetryPolicy
	// Transport carries the requests (nil: a clone of http.DefaultTransport).
	Transport http.RoundTripper
	// AttemptTimeout bounds one HTTP attempt (0: 60 s).
	AttemptTimeout time.Duration
}

// ParseURL checks a deployment URL: http or https, a host, nothing after the path.
func ParseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("the scheme must be https (or http for a development deployment)")
	case u.Host == "":
		return nil, errors.New("it has no host")
	case u.User != nil:
		return nil, errors.New("it must not carry credentials; use the token argument")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, errors.New("it must not have a query or a fragment")
	}
	return u, nil
}

// New builds a client for cfg.
func New(cfg Config) (*Client, error) {
	if _, err := ParseURL(cfg.URL); err != nil {
		return nil, fmt.Errorf("invalid URL %q: %w", cfg.URL, err)
	}
	transport := cfg.Transport
	if transport == nil {
		t, ok := http.DefaultTransport.(*http.Transport)
		if !ok {
			return nil, errors.New("http.DefaultTransport is not an *http.Transport")
		}
		t = t.Clone()
		// Terraform runs up to -parallelism operations at once against one host.
		t.MaxIdleConnsPerHost = 32
		transport = t
	}
	timeout := cfg.AttemptTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	doer := &retryingDoer{
		base:   &http.Client{Transport: transport, Timeout: timeout},
		policy: cfg.Retry.withDefaults(),
	}
	token, userAgent := cfg.Token, cfg.UserAgent
	api, err := client.NewClientWithResponses(strings.TrimRight(cfg.URL, "/"),
		client.WithHTTPClient(doer),
		client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+token)
			if userAgent != "" {
				req.Header.Set("User-Agent", userAgent)
			}
			return nil
		}))
	if err != nil {
		return nil, err
	}
	return &Client{API: api, URL: cfg.URL}, nil
}

// Replayed reports whether the server answered a keyed request from its stored result rather
// than by executing it.
func Replayed(r *http.Response) bool {
	return r != nil && r.Header.Get("Idempotent-Replayed") == "true"
}

// IfMatch is the If-Match value for a version: a strong entity tag.
func IfMatch(version int64) string { return fmt.Sprintf("%q", fmt.Sprint(version)) }
