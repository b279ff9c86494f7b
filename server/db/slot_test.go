package db_test

import (
	"context"
	"testing"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/servertest"
)

// TestSlotOfAHijackedConnectionIsFreed: a connection taken out of the pool (River's listener
// hijacks one) is closed by its taker, without the pool's BeforeClose; its slot must still come
// back, or each such connection would add a usage counter row per organization and day.
func TestSlotOfAHijackedConnectionIsFreed(t *testing.T) {
	ctx := context.Background()
	pool, err := db.Open(ctx, servertest.NewDatabase(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	slots := map[string]bool{}
	for range 4 {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var slot string
		if err := c.QueryRow(ctx, "SELECT current_setting('"+db.SlotSetting+"')").Scan(&slot); err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
		if err := c.Hijack().Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(slots) != 1 {
		t.Errorf("four connections of a one-connection pool, each hijacked and closed, had slots %v; want one slot", slots)
	}
}
