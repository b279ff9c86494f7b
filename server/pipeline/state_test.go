package pipeline

import (
	"context"
	"errors"
	"testing"
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
