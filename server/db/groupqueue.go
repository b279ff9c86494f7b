package db

import (
	"context"
	"slices"
	"sync"
)

// GroupQueue is group commit's scheduling, shared by intake's statements (domain.IntakeGroups)
// and authentication's reads (ReadGroups): at most slots sends at once. A call that finds a slot
// free goes at once, alone, on its request's own goroutine (Enter, then Release), so a quiet
// server adds no wait. Calls that arrive while every slot is taken wait, in arrival order
// (Wait); whoever frees a slot while calls wait starts a sender, which sends the groups pick
// makes from the queue, one after another, until the queue is empty. A call to go again alone
// (Requeue: its group failed for what one call of it held) goes first, in a group of its own.
//
// While calls wait, every slot is taken (a call waits only when none is free, and a sender stops
// only on an empty queue), so a free slot means an empty queue.
type GroupQueue[C Call] struct {
	slots int
	// pick splits the queue (never empty; under mu) into the next group (at least one call, in
	// arrival order; an Alone call only in a group of its own) and the rest, in order; rest may
	// use queue's array.
	pick func(queue []C) (group, rest []C)
	// send sends a group and answers each of its calls (Waiter.Answer), or requeues them.
	send func(group []C)
	// spill: the slots past the first are only for calls that one group cannot carry (see
	// SpillOnly).
	spill bool

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

// SpillOnly makes the slots past the first carry only what one group cannot: a call that finds
// a send running waits, even with a slot free, and a second send starts only when the waiting
// calls are more than the next group can carry (a send stops when what is left fits in one
// group, which the send running will take). Large groups then, and sends at once only for
// overflow: for intake, few statements while small batches fit in one, more for batches that
// fill a group each (an agent catching up).
func (q *GroupQueue[C]) SpillOnly() *GroupQueue[C] {
	q.spill = true
	return q
}

// Enter takes a free slot, if there is one (for a SpillOnly queue, if no send is running): then
// the caller sends its call alone, now, and calls Release after.
func (q *GroupQueue[C]) Enter() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.running == q.slots || q.spill && q.running > 0 {
		return false
	}
	q.running++
	q.sends++
	q.calls++
	return true
}

// Wait queues c until a sender answers it (nil: c's results are set) or c's context ends (its
// error, at once: a call already in a group goes on for the others, and its results are set
// for no one).
func (q *GroupQueue[C]) Wait(c C) error {
	w := c.waiter()
	w.done = make(chan struct{})
	q.mu.Lock()
	q.queue = append(q.queue, c)
	q.calls++
	if q.spill && q.running < q.slots && q.overflows() {
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

// run sends groups from the queue until it is empty (for a SpillOnly queue, a send that is not
// the only one stops when what waits fits in one group); it holds one of the slots.
func (q *GroupQueue[C]) run() {
	for {
		q.mu.Lock()
		if len(q.queue) == 0 || q.spill && q.running > 1 && !q.overflows() {
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
