package apiclient

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
)

// RetryPolicy says how often and how patiently a transient failure is retried.
type RetryPolicy struct {
	// MaxAttempts counts the first attempt (0: 5; 1: never retry).
	MaxAttempts int
	// MinBackoff and MaxBackoff bound the exponential wait between attempts (0: 250 ms and 5 s).
	MinBackoff, MaxBackoff time.Duration
	// MaxRetryAfter is the longest Retry-After honoured; a 429 asking for more is returned as
	// it is (0: 60 s).
	MaxRetryAfter time.Duration
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts == 0 {
		p.MaxAttempts = 5
	}
	if p.MinBackoff == 0 {
		p.MinBackoff = 250 * time.Millisecond
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = 5 * time.Second
	}
	if p.MaxRetryAfter == 0 {
		p.MaxRetryAfter = 60 * time.Second
	}
	return p
}

type retrySafeKey struct{}

// RetrySafe marks the requests made with ctx as safe to repeat although they carry no
// Idempotency-Key: operations the API defines as "already in the target state is success"
// (scheduling a deletion, revoking an invitation).
func RetrySafe(ctx context.Context) context.Context {
	return context.WithValue(ctx, retrySafeKey{}, true)
}

// replaySafe says whether sending req again cannot do anything twice: reads, requests with an
// Idempotency-Key (a repeat replays the stored result), and target-state operations. A PUT or
// PATCH guarded by If-Match without a key is not: had the first attempt committed, a repeat
// would fail with 412 and hide the success.
func replaySafe(req *http.Request) bool {
	switch {
	case req.Method == http.MethodGet || req.Method == http.MethodHead:
		return true
	case req.Header.Get("Idempotency-Key") != "":
		return true
	}
	safe, _ := req.Context().Value(retrySafeKey{}).(bool)
	return safe
}

// retryingDoer retries transient failures: network errors (the request may or may not have
// reached the server), 502, 503 and 504, and 429 after its Retry-After. Each retry is the same
// request with the same headers, so a keyed create that the server committed before the
// connection broke is answered from the stored result instead of creating a second object.
type retryingDoer struct {
	base   *http.Client
	policy RetryPolicy
}

func (d *retryingDoer) Do(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	safe := replaySafe(req)
	for attempt := 1; ; attempt++ {
		try := req
		if attempt > 1 {
			try = req.Clone(ctx)
			if req.GetBody != nil {
				body, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				try.Body = body
			}
		}
		resp, err := d.base.Do(try)
		if !safe || attempt >= d.policy.MaxAttempts || ctx.Err() != nil {
			if err != nil && attempt > 1 {
				err = fmt.Errorf("after %d attempts: %w", attempt, err)
			}
			return resp, err
		}
		wait, retry := d.next(resp, err, attempt)
		if !retry {
			return resp, err
		}
		var reason string
		if err != nil {
			reason = err.Error()
		} else {
			reason = resp.Status
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			_ = resp.Body.Close()
		}
		tflog.Warn(ctx, "Renga API request failed transiently; retrying", map[string]any{
			"method": req.Method, "path": req.URL.Path, "attempt": attempt, "reason": reason,
			"wait": wait.String(), "idempotency_key_sent": req.Header.Get("Idempotency-Key") != "",
		})
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}

// next decides whether a failed attempt is retried, and after how long.
func (d *retryingDoer) next(resp *http.Response, err error, attempt int) (time.Duration, bool) {
	backoff := d.policy.MinBackoff << (attempt - 1)
	if backoff > d.policy.MaxBackoff || backoff <= 0 {
		backoff = d.policy.MaxBackoff
	}
	// Jitter keeps parallel operations from retrying in lockstep.
	backoff = backoff/2 + rand.N(backoff/2+1)
	if err != nil {
		// The caller's own cancellation was handled before; this is the network or the
		// attempt's timeout.
		return backoff, true
	}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		if after, ok := retryAfter(resp); ok {
			if after > d.policy.MaxRetryAfter {
				return 0, false
			}
			return max(after, backoff), true
		}
		return backoff, true
	case http.StatusTooManyRequests:
		after, ok := retryAfter(resp)
		if !ok {
			return backoff, true
		}
		if after > d.policy.MaxRetryAfter {
			return 0, false
		}
		return after, true
	}
	return 0, false
}

// retryAfter reads Retry-After: delay-seconds or an HTTP date.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0), true
	}
	return 0, false
}
