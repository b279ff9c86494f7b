package db_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"renga.dev/renga/server/db"
)

type queued struct {
	db.Waiter
	id string
}

// pickTwo makes groups of at most two calls, in arrival order.
func pickTwo(queue []*queued) (group, rest []*queued) {
	n := min(2, len(queue))
	group = append(group, queue[:n]...)
	return group, append(queue[:0], queue[n:]...)
}

// TestGroupQueueSpillsOnlyOverflow: with a send running, the queue's calls wait even with a slot
// free, while they fit in one group; a second send starts when they are more than one group can
// carry; at most slots sends run at once, and every call is answered.
func TestGroupQueueSpillsOnlyOverflow(t *testing.T) {
	type send struct {
		ids     []string
		release chan struct{}
	}
	started := make(chan send, 8)
	var mu sync.Mutex
	active, most := 0, 0
	q := db.NewGroupQueue(2, pickTwo, func(group []*queued) {
		mu.Lock()
		active++
		most = max(most, active)
		mu.Unlock()
		s := send{release: make(chan struct{})}
		for _, c := range group {
			s.ids = append(s.ids, c.id)
		}
		started <- s
		<-s.release
		mu.Lock()
		active--
		mu.Unlock()
		for _, c := range group {
			c.Answer()
		}
	})

	if !q.Enter() {
		t.Fatal("an idle queue did not let a call go alone")
	}
	// A second call, with a slot free but a send running, waits.
	if q.Enter() {
		t.Fatal("the queue let a call go alone beside a running send")
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	wait := func(id string) {
		wg.Go(func() {
			if err := q.Wait(&queued{Waiter: db.Waiter{Ctx: ctx}, id: id}); err != nil {
				t.Errorf("call %s: %v", id, err)
			}
		})
	}
	waitFor := func(waiting int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			if _, _, w := q.Counts(); w == waiting {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("never %d calls waiting", waiting)
			}
			time.Sleep(time.Millisecond)
		}
	}
	wait("b")
	waitFor(1)
	wait("c")
	waitFor(2) // b and c fit in one group: still no second send
	select {
	case s := <-started:
		t.Fatalf("a send of %v started while the waiting calls fit in one group", s.ids)
	case <-time.After(50 * time.Millisecond):
	}
	wait("d") // b, c, d: more than a group; a second send takes b and c
	var second send
	select {
	case second = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no second send when the waiting calls overflowed a group")
	}
	if len(second.ids) != 2 || second.ids[0] != "b" || second.ids[1] != "c" {
		t.Errorf("second send carried %v; want [b c]", second.ids)
	}
	// The alone call ends: d fits in one group, which the running send takes after its own.
	q.Release()
	close(second.release)
	select {
	case third := <-started:
		if len(third.ids) != 1 || third.ids[0] != "d" {
			t.Errorf("third send carried %v; want [d]", third.ids)
		}
		close(third.release)
	case <-time.After(10 * time.Second):
		t.Fatal("d was never sent")
	}
	wg.Wait()
	if most > 1 {
		// The alone call's send is the caller's own, outside the callback: the callback's
		// sends overlap only when two senders run, and here one did at a time.
		t.Errorf("%d sends of groups ran at once; want 1 (the other slot was the alone call's)", most)
	}
	if sends, calls, waiting := q.Counts(); sends != 3 || calls != 4 || waiting != 0 {
		t.Errorf("counts: %d sends, %d calls, %d waiting; want 3, 4, 0", sends, calls, waiting)
	}
}

// TestGroupQueueWaitOnIdleQueue: a call that waits while no send runs (it did not Enter, or the
// send that made Enter refuse ended meanwhile) starts the sender itself, and is sent as a group
// of its own; it never waits for a send that will not come.
func TestGroupQueueWaitOnIdleQueue(t *testing.T) {
	var sent [][]string
	q := db.NewGroupQueue(2, pickTwo, func(group []*queued) {
		var ids []string
		for _, c := range group {
			ids = append(ids, c.id)
		}
		sent = append(sent, ids) // one sender at a time here: the calls wait one after another
		for _, c := range group {
			c.Answer()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range []string{"a", "b"} {
		if err := q.Wait(&queued{Waiter: db.Waiter{Ctx: ctx}, id: id}); err != nil {
			t.Fatalf("call %s on an idle queue: %v", id, err)
		}
	}
	if len(sent) != 2 || len(sent[0]) != 1 || sent[0][0] != "a" || len(sent[1]) != 1 || sent[1][0] != "b" {
		t.Errorf("sent %v; want [[a] [b]]", sent)
	}
	if sends, calls, waiting := q.Counts(); sends != 2 || calls != 2 || waiting != 0 {
		t.Errorf("counts: %d sends, %d calls, %d waiting; want 2, 2, 0", sends, calls, waiting)
	}
	// The sender ends with the queue empty, and gives its slot back: Enter is free again.
	deadline := time.Now().Add(10 * time.Second)
	for !q.Enter() {
		if time.Now().After(deadline) {
			t.Fatal("the queue's sender never gave its slot back")
		}
		time.Sleep(time.Millisecond)
	}
	q.Release()
}
