package logbuf

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"
)

// slogLine is what slog's own JSON handler writes for r.
func slogLine(t testing.TB, opts *slog.HandlerOptions, r slog.Record) string {
	t.Helper()
	var b bytes.Buffer
	if err := slog.NewJSONHandler(&b, opts).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// fastLine is what NewJSONHandler writes for r (interval 0: each line at once).
func fastLine(t testing.TB, opts *slog.HandlerOptions, r slog.Record) string {
	t.Helper()
	d := &dest{}
	if err := NewJSONHandler(New(d, 0), opts).Handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// tricky are strings whose quoting differs between JSON encoders: quotes, backslashes, control
// characters, HTML's characters, invalid UTF-8, U+2028 and U+2029, DEL, multi-byte runes.
var tricky = []string{
	"", "plain", `"quoted"`, `back\slash`, "line\nfeed", "cr\rtab\t", "\x00\x01\x1f\x7f",
	"<script>&amp;</script>", "\xff\xfe invalid", "a\xc3", "sep\u2028para\u2029end", "snow ☃ 🎉",
	"mixed \"\\\n\u2028\xff<>&", "\u2027\u202a", "\ufffd",
}

func accessRecord(at time.Time, s string) slog.Record {
	r := slog.NewRecord(at, slog.LevelInfo, "request", 0)
	r.AddAttrs(slog.String("request_id", "req_01m8xd6y1a0y34e276dk93y570"), slog.String("method", "GET"),
		slog.String("route", s), slog.String("operation", "getHome"), slog.Int("status", 200),
		slog.Duration("duration", 1234567*time.Nanosecond), slog.String("actor", ""), slog.String("source", "127.0.0.1"))
	return r
}

func TestJSONLinesAreSlogs(t *testing.T) {
	at := time.Date(2026, 12, 4, 5, 6, 7, 890123456, time.FixedZone("", 3600))
	var records []slog.Record
	for _, s := range tricky {
		records = append(records, accessRecord(at, s))
		r := slog.NewRecord(at, slog.LevelWarn+2, s, 0)
		r.AddAttrs(slog.String(s+"key", s)) // an empty key is slog's (TestJSONLinesFallBackToSlog)
		records = append(records, r)
	}
	r := slog.NewRecord(time.Time{}, slog.LevelDebug-1, "no time", 0) // slog leaves the key out
	r.AddAttrs(slog.Int64("min", math.MinInt64), slog.Uint64("max", math.MaxUint64), slog.Bool("yes", true),
		slog.Bool("no", false), slog.Duration("negative", -time.Second), slog.Time("at", at.UTC()),
		slog.Time("local", time.Date(1, 1, 1, 0, 0, 0, 1, time.Local)))
	records = append(records, r)
	// A time with a monotonic reading: slog drops it (Round(0)).
	records = append(records, accessRecord(time.Now(), "/api/v1/agent/home"))
	for _, r := range records {
		want := slogLine(t, nil, r)
		if got, ok := appendJSONRecord(nil, r); !ok || string(got) != want {
			t.Errorf("record %q: encoded %v\n got %s\nwant %s", r.Message, ok, got, want)
		}
		if got := fastLine(t, nil, r); got != want {
			t.Errorf("record %q: handler wrote\n%s\nwant\n%s", r.Message, got, want)
		}
		if got, done := logAttrsLine(t, nil, r); !done || got != want {
			t.Errorf("record %q: LogAttrs wrote (%v)\n%s\nwant\n%s", r.Message, done, got, want)
		}
	}
}

// A record this encoding does not take goes to slog's handler, whole; so does every record of a
// handler whose options it does not follow, or one derived with attributes or a group.
func TestJSONLinesFallBackToSlog(t *testing.T) {
	at := time.Date(2026, 12, 4, 5, 6, 7, 0, time.UTC)
	var others []slog.Record
	for _, a := range []slog.Attr{
		slog.Any("error", errors.New("boom")), slog.Float64("ratio", 0.5), slog.Float64("nan", math.NaN()),
		slog.Group("g", slog.String("k", "v")), slog.Group("", slog.String("inlined", "v")), {},
		slog.Time("far", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)), slog.Any("bytes", []byte("x")),
		slog.String("", "no key"), slog.String("", ""),
	} {
		r := slog.NewRecord(at, slog.LevelInfo, "other", 0)
		r.AddAttrs(slog.String("before", "x"), a, slog.String("after", "y"))
		others = append(others, r)
	}
	others = append(others, slog.NewRecord(time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), slog.LevelInfo, "year -1", 0))
	for _, r := range others {
		if got, ok := appendJSONRecord(nil, r); ok {
			t.Errorf("record %q: encoded here as %s; want it left to slog", r.Message, got)
		}
		if got, want := fastLine(t, nil, r), slogLine(t, nil, r); got != want {
			t.Errorf("record %q: wrote\n%s\nwant\n%s", r.Message, got, want)
		}
		if got, done := logAttrsLine(t, nil, r); done || got != "" {
			t.Errorf("record %q: LogAttrs wrote (%v) %q; want nothing, left to Handle", r.Message, done, got)
		}
	}

	r := accessRecord(at, "/x")
	replace := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == "method" {
			a.Value = slog.StringValue("replaced")
		}
		return a
	}}
	if got, want := fastLine(t, replace, r), slogLine(t, replace, r); got != want || !bytes.Contains([]byte(got), []byte("replaced")) {
		t.Errorf("with ReplaceAttr: wrote\n%s\nwant\n%s", got, want)
	}
	source := &slog.HandlerOptions{AddSource: true}
	if got, want := fastLine(t, source, r), slogLine(t, source, r); got != want {
		t.Errorf("with AddSource: wrote\n%s\nwant\n%s", got, want)
	}
	for name, opts := range map[string]*slog.HandlerOptions{"ReplaceAttr": replace, "AddSource": source} {
		if got, done := logAttrsLine(t, opts, r); done || got != "" {
			t.Errorf("with %s: LogAttrs wrote (%v) %q; want nothing, left to Handle", name, done, got)
		}
	}
	for name, derive := range map[string]func(slog.Handler) slog.Handler{
		"WithAttrs": func(h slog.Handler) slog.Handler { return h.WithAttrs([]slog.Attr{slog.String("server", "test")}) },
		"WithGroup": func(h slog.Handler) slog.Handler { return h.WithGroup("g") },
	} {
		d, want := &dest{}, &bytes.Buffer{}
		if err := derive(NewJSONHandler(New(d, 0), nil)).Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if err := derive(slog.NewJSONHandler(want, nil)).Handle(context.Background(), r); err != nil {
			t.Fatal(err)
		}
		if d.String() != want.String() {
			t.Errorf("%s: wrote\n%s\nwant\n%s", name, d.String(), want.String())
		}
		d = &dest{}
		derived := derive(NewJSONHandler(New(d, 0), nil)).(*Handler) //nolint:forcetypeassert // logbuf derives its own
		if done, _ := derived.LogAttrs(r.Time, r.Level, r.Message, recordAttrs(r)); done || d.String() != "" {
			t.Errorf("%s: LogAttrs wrote (%v) %q; want nothing, left to Handle", name, done, d.String())
		}
	}
}

// A warning written by the fast path, through Handle or LogAttrs, is flushed at once, as through
// slog's.
func TestJSONHandlerFlushesWarnings(t *testing.T) {
	for name, write := range map[string]func(*Handler, slog.Level, string){
		"Handle": func(h *Handler, level slog.Level, msg string) {
			_ = h.Handle(context.Background(), slog.NewRecord(time.Time{}, level, msg, 0))
		},
		"LogAttrs": func(h *Handler, level slog.Level, msg string) {
			if done, _ := h.LogAttrs(time.Time{}, level, msg, nil); !done {
				t.Fatalf("LogAttrs: %q not written", msg)
			}
		},
	} {
		d := &dest{}
		h := NewJSONHandler(New(d, time.Hour), nil)
		write(h, slog.LevelInfo, "waits")
		if d.count() != 0 {
			t.Fatalf("%s: an info line was written before the interval", name)
		}
		write(h, slog.LevelWarn, "at once")
		if got, want := d.String(), "{\"level\":\"INFO\",\"msg\":\"waits\"}\n{\"level\":\"WARN\",\"msg\":\"at once\"}\n"; got != want {
			t.Fatalf("%s: wrote %q, want %q", name, got, want)
		}
	}
}

// recordAttrs is r's attributes, in order.
func recordAttrs(r slog.Record) []slog.Attr {
	var attrs []slog.Attr
	r.Attrs(func(a slog.Attr) bool { attrs = append(attrs, a); return true })
	return attrs
}

// logAttrsLine is what LogAttrs writes, with a handler made by NewJSONHandler(opts), for r's
// time, level, message and attributes, and whether it wrote it.
func logAttrsLine(t testing.TB, opts *slog.HandlerOptions, r slog.Record) (string, bool) {
	t.Helper()
	d := &dest{}
	done, err := NewJSONHandler(New(d, 0), opts).LogAttrs(r.Time, r.Level, r.Message, recordAttrs(r))
	if err != nil {
		t.Fatal(err)
	}
	return d.String(), done
}

// TestLogAttrsAllocatesNothing: the access line, eight attributes from the caller's array,
// written by LogAttrs without an allocation (what it is for: a slog.Record's attributes past the
// fifth take one). A count, not a time: it does not depend on the machine.
//
// Fails when: LogAttrs's attributes escape to the heap (an interface in the way, a closure that
// escapes), or its line buffer is no longer pooled.
func TestLogAttrsAllocatesNothing(t *testing.T) {
	h := NewJSONHandler(New(&dest{}, time.Hour), nil)
	at := time.Date(2026, 12, 4, 5, 6, 7, 0, time.UTC)
	allocs := testing.AllocsPerRun(1000, func() {
		attrs := [...]slog.Attr{slog.String("request_id", "req_01m8xd6y1a0y34e276dk93y570"), slog.String("method", "GET"),
			slog.String("route", "/api/v1/agent/home"), slog.String("operation", "getHome"), slog.Int("status", 200),
			slog.Duration("duration", time.Millisecond), slog.String("actor", ""), slog.String("source", "127.0.0.1")}
		if done, err := h.LogAttrs(at, slog.LevelInfo, "request", attrs[:]); !done || err != nil {
			t.Fatalf("not written: %v", err)
		}
	})
	if allocs != 0 {
		t.Errorf("LogAttrs: %v allocations per line, want 0", allocs)
	}
}

func FuzzJSONLinesAreSlogs(f *testing.F) {
	for i, s := range tricky {
		f.Add(s, tricky[(i+1)%len(tricky)], int64(i)*1e9+123, int64(i-4), uint64(i), i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, msg, s string, nanos, n int64, u uint64, yes bool) {
		at := time.Unix(0, nanos).In(time.FixedZone("", int(n%86400)))
		r := slog.NewRecord(at, slog.Level(n%20), msg, 0)
		r.AddAttrs(slog.String("s", s), slog.String(s+"k", msg), slog.Int64("n", n), slog.Uint64("u", u),
			slog.Bool("yes", yes), slog.Duration("d", time.Duration(nanos)), slog.Time("t", at))
		want := slogLine(t, nil, r)
		if got, ok := appendJSONRecord(nil, r); !ok || string(got) != want {
			t.Fatalf("encoded %v\n got %s\nwant %s", ok, got, want)
		}
		if got, ok := appendJSONAttrs(nil, r.Time, r.Level, r.Message, recordAttrs(r)); !ok || string(got) != want {
			t.Fatalf("encoded from attributes %v\n got %s\nwant %s", ok, got, want)
		}
	})
}

// TestJSONTimesAreRFC3339Nano: a line's time, written from the text of its second kept for the
// next line (lastSecond), is the one AppendFormat(RFC3339Nano) writes: through many seconds,
// nanoseconds with and without trailing zeros, locations taking turns (the kept second is
// another location's), an offset with seconds, and from goroutines at once (go test -race).
//
// Fails when: a kept second is used for another second or another location, the fraction keeps
// a trailing zero or writes one for none, or the kept second is shared unsafely.
func TestJSONTimesAreRFC3339Nano(t *testing.T) {
	locations := []*time.Location{time.UTC, time.Local, time.FixedZone("", -(3*3600 + 30*60 + 7)), time.FixedZone("x", 14*3600)}
	nanos := []int{0, 1, 10, 999_999_999, 120_000_000, 500_000_001, 100}
	start := time.Date(2026, 12, 31, 23, 59, 58, 0, time.UTC)
	check := func(t *testing.T, g int) {
		for i := range 3000 {
			at := start.Add(time.Duration(i/7)*time.Second + time.Duration(nanos[(i+g)%len(nanos)]))
			at = at.In(locations[(i/3+g)%len(locations)])
			want := `"` + at.Format(time.RFC3339Nano) + `"`
			if got, ok := appendJSONTime(nil, at); !ok || string(got) != want {
				t.Errorf("%v: got %s (%v), want %s", at, got, ok, want)
				return
			}
		}
	}
	check(t, 0)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() { check(t, g) })
	}
	wg.Wait()
}
