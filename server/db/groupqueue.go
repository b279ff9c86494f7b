package db

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// GroupQueue is group commit's scheduling (intake's statements: domain.IntakeGroups): at most
// slots sends at once. A call that finds no send running goes at once, alone, on its request's
// own goroutine (Enter, then Release), so a quiet server adds no wait. A call that finds a send
// running waits, in arrival order (Wait), even with a slot free: the send running, or whoever
// ends it, takes the waiting calls as the groups pick makes from the queue, one after another,
// until the queue is empty. A second send starts only when the waiting calls are more than the
// next group can carry, and stops when what is left fits in one group, which the first takes:
// large groups, and sends at once only for overflow. A call to go again alone (Requeue: its
// group failed for what one call of it held) goes first, in a group of its own.
type GroupQueue[C Call] struct {
	slots int
	// pick splits the queue (never empty; under mu) into the next group (at least one call, in
	// arrival order; an Alone call only in a group of its own) and the rest, in order; rest may
	// use queue's array.
	pick func(queue []C) (group, rest []C)
	// send sends a group and answers each of its calls (Waiter.Answer), or requeues them.
	send func(group []C)

	mu      sync.Mutex
	queue   []C
	running int
	sends   int64
	calls   int64
}

// Call is what a GroupQueue holds: a pointer to a type that embeds Waiter.
type Call interface{ waiter() *Waiter }

// Waiter is a call's place in a GroupQueue: embed it in the call's type, with Ctx its request's
// context.
type Waiter struct {
	Ctx   context.Context
	taken bool // in a group (under the queue's mu)
	alone bool // goes in a group of its own (its group failed for what one call held)
	done  chan struct{}
}

func (w *Waiter) waiter() *Waiter { return w }

// Alone reports whether the call goes in a group of its own: pick keeps it out of others'.
func (w *Waiter) Alone() bool { return w.alone }

// Answer tells the waiting caller that its call is answered (its results set before).
func (w *Waiter) Answer() { close(w.done) }

// NewGroupQueue makes a queue with at most slots (at least 1) sends at once.
func NewGroupQueue[C Call](slots int, pick func(queue []C) (group, rest []C), send func(group []C)) *GroupQueue[C] {
	return &GroupQueue[C]{slots: max(1, slots), pick: pick, send: send}
}

// Enter takes a slot if no send is running: then the caller sends its call alone, now, and
// calls Release after.
func (q *GroupQueue[C]) Enter() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running > 0 {
		return false
	}
	q.running++
	q.sends++
	q.calls++
	return true
}

// Wait queues c until a sender answers it (nil: c's results are set) or c's context ends (its
// error, at once: a call already in a group goes on for the others, and its results are set
// for no one). A caller may Wait without trying Enter first: its call then always goes in a
// group, sent by the queue's sender (a group of one when no other call waits).
func (q *GroupQueue[C]) Wait(c C) error {
	w := c.waiter()
	w.done = make(chan struct{})
	q.mu.Lock()
	q.queue = append(q.queue, c)
	q.calls++
	// No send running (the one that made Enter refuse may have ended since): this call starts
	// the sender. Sends running, and more waiting than a group carries: one more, within slots.
	if q.running == 0 || q.running < q.slots && q.overflows() {
		q.running++
		go q.run()
	}
	q.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-w.Ctx.Done():
		q.mu.Lock()
		if !w.taken {
			for i, other := range q.queue {
				if other.waiter() == w {
					q.queue = append(q.queue[:i], q.queue[i+1:]...)
					break
				}
			}
		}
		q.mu.Unlock()
		return w.Ctx.Err()
	}
}

// Release gives back a slot: to a sender for the calls waiting, if any.
func (q *GroupQueue[C]) Release() {
	q.mu.Lock()
	if len(q.queue) == 0 {
		q.running--
		q.mu.Unlock()
		return
	}
	q.mu.Unlock()
	go q.run()
}

// overflows reports whether the waiting calls are more than the next group can carry. Under mu.
func (q *GroupQueue[C]) overflows() bool {
	if len(q.queue) < 2 {
		return false
	}
	group, _ := q.pick(slices.Clone(q.queue))
	return len(group) < len(q.queue)
}

// run sends groups from the queue until it is empty (a send that is not the only one stops when
// what waits fits in one group); it holds one of the slots.
func (q *GroupQueue[C]) run() {
	for {
		q.mu.Lock()
		if len(q.queue) == 0 || q.running > 1 && !q.overflows() {
			q.running--
			q.mu.Unlock()
			return
		}
		group, rest := q.pick(q.queue)
		for _, c := range group {
			c.waiter().taken = true
		}
		q.sends++
		clear(q.queue[len(rest):])
		q.queue = rest
		q.mu.Unlock()
		q.send(group)
	}
}

// Requeue puts calls of a group that failed back first in the queue, each to go alone (within
// the slots: a call that fails every group it is in costs the others one send each, not a
// burst).
func (q *GroupQueue[C]) Requeue(calls []C) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, c := range calls {
		w := c.waiter()
		w.taken, w.alone = false, true
	}
	q.queue = append(calls, q.queue...)
}

// CountAlone counts a call that its caller sent alone, without the queue (a send and a call).
func (q *GroupQueue[C]) CountAlone() {
	q.mu.Lock()
	q.sends++
	q.calls++
	q.mu.Unlock()
}

// CountSend counts a send made outside the slots (a call that must wait for a lock alone).
func (q *GroupQueue[C]) CountSend() {
	q.mu.Lock()
	q.sends++
	q.mu.Unlock()
}

// Counts are the sends (alone and in groups) and the calls (each once) since the queue was made,
// and the calls waiting now.
func (q *GroupQueue[C]) Counts() (sends, calls int64, waiting int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.sends, q.calls, len(q.queue)
}

// GroupContextOf is GroupContext for a group's calls: what its send runs under.
func GroupContextOf[C Call](group []C) (context.Context, context.CancelFunc) {
	ctxs := make([]context.Context, len(group))
	for i, c := range group {
		ctxs[i] = c.waiter().Ctx
	}
	return GroupContext(ctxs)
}

// GroupContext is what a statement sent for several requests runs under: no one request's
// cancellation stops it (the others are waiting for it), and it has as long as the request
// with the most time left; once every request has ended, no one waits for it, and it is
// cancelled. ctxs are the requests' contexts (at least one).
func GroupContext(ctxs []context.Context) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctxs[0])
	var ctx context.Context
	var cancel context.CancelFunc
	if last, ok := latestDeadline(ctxs); ok {
		ctx, cancel = context.WithDeadline(base, last)
	} else {
		ctx, cancel = context.WithCancel(base)
	}
	var left atomic.Int64
	left.Store(int64(len(ctxs)))
	stops := make([]func() bool, len(ctxs))
	for i, c := range ctxs {
		stops[i] = context.AfterFunc(c, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// latestDeadline is the latest of ctxs' deadlines; none if one has none.
func latestDeadline(ctxs []context.Context) (time.Time, bool) {
	var last time.Time
	for _, c := range ctxs {
		d, ok := c.Deadline()
		if !ok {
			return time.Time{}, false
		}
		if d.After(last) {
			last = d
		}
	}
	return last, true
}
