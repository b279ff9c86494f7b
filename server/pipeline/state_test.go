package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestPrefetched(t *testing.T) {
	with := func(p *prefetched) context.Context {
		return context.WithValue(context.Background(), stateKey{}, &State{prefetched: p})
	}
	if _, ok, err := Prefetched[int](context.Background()); ok || err != nil {
		t.Errorf("no state: ok %v, err %v", ok, err)
	}
	if _, ok, err := Prefetched[int](with(nil)); ok || err != nil {
		t.Errorf("nothing prefetched: ok %v, err %v", ok, err)
	}
	if v, ok, err := Prefetched[int](with(&prefetched{v: 7})); !ok || err != nil || v != 7 {
		t.Errorf("prefetched 7: %v %v %v", v, ok, err)
	}
	if _, ok, err := Prefetched[string](with(&prefetched{v: 7})); ok || err != nil {
		t.Errorf("another type: ok %v, err %v; want the handler to read for itself", ok, err)
	}
	gone := errors.New("not found")
	if _, ok, err := Prefetched[int](with(&prefetched{err: gone})); !ok || !errors.Is(err, gone) {
		t.Errorf("a failed read: ok %v, err %v; want its error", ok, err)
	}
}

// TestStateContext: the access stage's context (stateContext) carries the state to contexts
// derived from it, passes every other key to its parent, and is cancelled with its parent.
func TestStateContext(t *testing.T) {
	type otherKey struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), otherKey{}, "parent's"))
	rq := &requestParts{}
	rq.ctx = stateContext{Context: parent, st: &rq.st}
	child, stop := context.WithTimeout(&rq.ctx, time.Hour)
	defer stop()
	if From(child) != &rq.st {
		t.Error("a derived context does not carry the state")
	}
	if got := child.Value(otherKey{}); got != "parent's" {
		t.Errorf("another key: %v, want the parent's value", got)
	}
	cancel()
	select {
	case <-child.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("cancelling the parent did not cancel a derived context")
	}
	if !errors.Is(child.Err(), context.Canceled) {
		t.Errorf("derived context's error: %v", child.Err())
	}
}
