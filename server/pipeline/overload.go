package pipeline

import (
	"context"
	"net/http"
	"time"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/problem"
)

// OverloadRetryAfter is the Retry-After of a request refused for want of a slot.
const OverloadRetryAfter = 1

// admitLoad takes a slot among the API requests served at once, waiting up to InFlightWait for
// one: a flood queues briefly, then gets 503s, instead of every request waiting on the
// database pool until its deadline. Once admitted, the request gives its slot back with
// releaseLoad.
func (p *Pipeline) admitLoad(ctx context.Context) *problem.Error {
	if p.slots == nil {
		return nil
	}
	select {
	case p.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(p.opts.InFlightWait)
	defer t.Stop()
	select {
	case p.slots <- struct{}{}:
		return nil
	case <-t.C:
	case <-ctx.Done():
	}
	pe := problem.New(http.StatusServiceUnavailable, api.ErrorCodeUnavailable,
		"The deployment is serving as many requests as it allows at once; retry after the time in Retry-After.")
	pe.RetryAfter = OverloadRetryAfter
	return pe
}

// releaseLoad gives back the slot admitLoad took.
func (p *Pipeline) releaseLoad() {
	if p.slots != nil {
		<-p.slots
	}
}
