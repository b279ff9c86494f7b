package logbuf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// dest records each write it takes, as the destination of a Writer.
type dest struct {
	mu     sync.Mutex
	writes [][]byte
	fail   error
}

func (d *dest) Write(p []byte) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail != nil {
		return 0, d.fail
	}
	d.writes = append(d.writes, bytes.Clone(p))
	return len(p), nil
}

func (d *dest) String() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return string(bytes.Join(d.writes, nil))
}

func (d *dest) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.writes)
}

func TestConcurrentLinesArriveWholeInOrderInFewWrites(t *testing.T) {
	d := &dest{}
	w := New(d, time.Hour) // only Limit and Flush write here
	const writers, lines = 16, 2000
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range lines {
				if _, err := fmt.Fprintf(w, "writer %02d line %05d %s\n", g, i, strings.Repeat("x", g*10)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(d.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines written, want %d", len(got), writers*lines)
	}
	next := make([]int, writers)
	for _, line := range got {
		f := strings.Fields(line) // writer G line I [padding of G*10 x's]
		if len(f) < 4 || len(f) > 5 || f[0] != "writer" || f[2] != "line" {
			t.Fatalf("line %q: not one whole line", line)
		}
		g, gerr := strconv.Atoi(f[1])
		i, ierr := strconv.Atoi(f[3])
		if gerr != nil || ierr != nil || g < 0 || g >= writers {
			t.Fatalf("line %q: not one whole line", line)
		}
		pad := ""
		if len(f) == 5 {
			pad = f[4]
		}
		if i != next[g] || len(pad) != g*10 {
			t.Fatalf("line %q: want writer %d's line %d whole", line, g, next[g])
		}
		next[g]++
	}
	total := len(d.String())
	// Writers that find the buffer full at once each flush, the later ones what came in
	// between: more writes than total/Limit, never one per line.
	if n := d.count(); n > 2*(total/Limit+1) || n < total/Limit {
		t.Errorf("%d writes for %d bytes in %d lines; want about one per %d bytes", n, total, writers*lines, Limit)
	}
	for _, b := range d.writes {
		if len(b) > Limit {
			t.Errorf("a write of %d bytes, over the limit of %d", len(b), Limit)
		}
	}
}

func TestALineIsWrittenWithinTheInterval(t *testing.T) {
	d := &dest{}
	w := New(d, 20*time.Millisecond)
	if _, err := w.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("two\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for d.String() != "one\ntwo\n" {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s the destination holds %q, want both lines (no Flush: the timer writes them)", d.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := d.count(); n != 1 {
		t.Errorf("%d writes, want the two lines in one", n)
	}
	// The timer is armed again by the next line.
	if _, err := w.Write([]byte("three\n")); err != nil {
		t.Fatal(err)
	}
	for d.String() != "one\ntwo\nthree\n" {
		if time.Now().After(deadline) {
			t.Fatalf("the destination holds %q, want the third line written by the timer too", d.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNoIntervalWritesEachLineAtOnce(t *testing.T) {
	d := &dest{}
	w := New(d, 0)
	for _, line := range []string{"a\n", "b\n"} {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if d.count() != 2 || d.String() != "a\nb\n" {
		t.Fatalf("writes %q, want each line in its own write at once", d.writes)
	}
}

func TestALongLineIsWrittenWholeAfterWhatWaits(t *testing.T) {
	d := &dest{}
	w := New(d, time.Hour)
	long := strings.Repeat("y", Limit+1) + "\n"
	for _, line := range []string{"short\n", long, "after\n"} {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if d.String() != "short\n"+long+"after\n" {
		t.Fatal("lines out of order or cut")
	}
	if d.count() != 3 || string(d.writes[1]) != long {
		t.Errorf("%d writes; want what waited, then the long line alone, then the rest", d.count())
	}
}

func TestAFailedTimedWriteIsReportedByTheNextFlush(t *testing.T) {
	d := &dest{fail: errors.New("disk full")}
	w := New(d, time.Millisecond)
	if _, err := w.Write([]byte("lost\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		w.mu.Lock()
		failed := w.err != nil
		w.mu.Unlock()
		if failed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the timed write never ran")
		}
		time.Sleep(time.Millisecond)
	}
	if err := w.Flush(); err == nil || err.Error() != "disk full" {
		t.Fatalf("Flush: %v, want the timed write's error", err)
	}
	if err := w.Flush(); err != nil {
		t.Fatalf("second Flush: %v, want the error reported once", err)
	}
}

func TestHandlerWritesWarningsAtOnceWithWhatCameBefore(t *testing.T) {
	d := &dest{}
	w := New(d, time.Hour)
	log := slog.New(NewHandler(slog.NewJSONHandler(w, nil), w)).With("server", "test")
	log.Info("request", "status", 200)
	if d.count() != 0 {
		t.Fatalf("an info line was written at once: %q", d.String())
	}
	log.WithGroup("db").Warn("pool exhausted")
	out := d.String()
	info, warn := strings.Index(out, `"msg":"request"`), strings.Index(out, `"msg":"pool exhausted"`)
	if info < 0 || warn < info || !strings.Contains(out, `"server":"test"`) {
		t.Fatalf("after a warning the destination holds %q, want the info line then the warning", out)
	}
	log.Error("failed")
	if !strings.Contains(d.String(), `"msg":"failed"`) {
		t.Fatal("an error line waited")
	}
	if !log.Handler().Enabled(context.Background(), slog.LevelInfo) || log.Handler().Enabled(context.Background(), slog.LevelDebug) {
		t.Error("the handler's level is not the wrapped handler's")
	}
}

// TestJSONHandlerIsSlogs: NewJSONHandler writes slog's JSON lines, byte for byte, and flushes a
// warning at once with the lines before it.
func TestJSONHandlerIsSlogs(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456000, time.UTC)
	record := func(level slog.Level, msg string) slog.Record {
		r := slog.NewRecord(at, level, msg, 0)
		r.AddAttrs(slog.String("request_id", "req_1"), slog.Int("status", 200), slog.Duration("duration", time.Millisecond),
			slog.String("text", "<&> \"\\\n\u2028\xff"))
		return r
	}
	var want bytes.Buffer
	d := &dest{}
	h := NewJSONHandler(New(d, time.Hour), nil)
	for _, r := range []slog.Record{record(slog.LevelInfo, "waits"), record(slog.LevelWarn, "at once")} {
		if err := slog.NewJSONHandler(&want, nil).Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if err := h.Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if r.Level < slog.LevelWarn && d.count() != 0 {
			t.Fatal("an info line was written before the interval")
		}
	}
	if got := d.String(); got != want.String() {
		t.Fatalf("wrote %q, want slog's %q", got, want.String())
	}
}
