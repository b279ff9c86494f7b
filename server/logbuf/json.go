package logbuf

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"renga.dev/renga/server/jsonquote"
)

// NewJSONHandler returns a Handler writing log/slog's JSON lines to w: the lines
// slog.NewJSONHandler(w, opts) writes, byte for byte, each record at Warn or above flushed at
// once (NewHandler).
//
// A record whose attributes are all strings, integers, booleans, durations or times is encoded
// here, without slog's general machinery (its pooled state, the walk of each attribute through
// groups and ReplaceAttr): under load the access line, one per request, was a fifth of the CPU
// of the cheapest requests (BenchmarkHomeHandler). Any other record, and any record of a handler
// with options this encoding does not follow (ReplaceAttr, AddSource) or derived with WithAttrs
// or WithGroup, goes to slog's handler. TestJSONLinesAreSlogs and FuzzJSONLinesAreSlogs hold the
// two to the same bytes.
func NewJSONHandler(w *Writer, opts *slog.HandlerOptions) *Handler {
	h := NewHandler(slog.NewJSONHandler(w, opts), w)
	h.fast = opts == nil || (opts.ReplaceAttr == nil && !opts.AddSource)
	return h
}

// handleFast writes r as slog's JSON handler would, and reports whether it could: false, with
// nothing written, for a record it does not encode.
func (h *Handler) handleFast(r slog.Record) (bool, error) {
	return h.writeFast(func(b []byte) ([]byte, bool) { return appendJSONRecord(b, r) })
}

// LogAttrs writes the record of time t, level, msg and attrs as Handle writes such a record,
// and reports whether it did: false, with nothing written, for a record Handle would give to
// slog's handler (an attribute of another kind, options this encoding does not follow, a
// handler derived with WithAttrs or WithGroup); the caller then makes the record and calls
// Handle. The access log writes its line, one per request, this way: a slog.Record passed to
// Handle (through the slog.Handler interface) is copied to the heap, and keeps attributes past
// the fifth in a slice of its own, where attrs can stay on the caller's stack.
func (h *Handler) LogAttrs(t time.Time, level slog.Level, msg string, attrs []slog.Attr) (bool, error) {
	if !h.fast {
		return false, nil
	}
	done, err := h.writeFast(func(b []byte) ([]byte, bool) { return appendJSONAttrs(b, t, level, msg, attrs) })
	if done && level >= slog.LevelWarn {
		if ferr := h.w.Flush(); err == nil {
			err = ferr
		}
	}
	return done, err
}

// writeFast writes the line encode appends to a pooled buffer, unless encode reports it could
// not encode it.
func (h *Handler) writeFast(encode func([]byte) ([]byte, bool)) (bool, error) {
	bp := linePool.Get().(*[]byte) //nolint:forcetypeassert // linePool holds nothing else
	defer func() {
		if cap(*bp) <= 1<<12 { // a rare long line's buffer is not kept
			linePool.Put(bp)
		}
	}()
	b, ok := encode((*bp)[:0])
	*bp = b
	if !ok {
		return false, nil
	}
	_, err := h.w.Write(b)
	return true, err
}

var linePool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// appendJSONRecord appends r's line as slog's JSON handler (no ReplaceAttr, no AddSource, no
// groups or attributes of its own) writes it, and reports false when r holds what it does not
// encode: an attribute of another kind (group, any, float, LogValuer), an empty key, or a time
// outside the years 0–9999 (slog writes an error in its place).
func appendJSONRecord(b []byte, r slog.Record) ([]byte, bool) {
	b, ok := appendJSONHead(b, r.Time, r.Level, r.Message)
	if ok {
		r.Attrs(func(a slog.Attr) bool {
			b, ok = appendJSONAttr(b, a)
			return ok
		})
	}
	return append(b, '}', '\n'), ok
}

// appendJSONAttrs is appendJSONRecord for the record of t, level, msg and attrs.
func appendJSONAttrs(b []byte, t time.Time, level slog.Level, msg string, attrs []slog.Attr) ([]byte, bool) {
	b, ok := appendJSONHead(b, t, level, msg)
	for _, a := range attrs {
		if !ok {
			break
		}
		b, ok = appendJSONAttr(b, a)
	}
	return append(b, '}', '\n'), ok
}

// appendJSONHead appends a line's opening: its time (none for the zero time, as slog), level
// and message.
func appendJSONHead(b []byte, t time.Time, level slog.Level, msg string) ([]byte, bool) {
	b = append(b, '{')
	if !t.IsZero() {
		b = append(b, `"time":`...)
		var ok bool
		if b, ok = appendJSONTime(b, t); !ok {
			return b, false
		}
		b = append(b, ',')
	}
	b = append(b, `"level":`...)
	b = jsonquote.Slog(b, level.String())
	b = append(b, `,"msg":`...)
	return jsonquote.Slog(b, msg), true
}

// appendJSONAttr appends one attribute, or reports false for one slog would write otherwise
// (an empty key: slog leaves out an empty attribute and inlines a group's) or that is not
// encoded here.
func appendJSONAttr(b []byte, a slog.Attr) ([]byte, bool) {
	if a.Key == "" {
		return b, false
	}
	b = append(b, ',')
	b = jsonquote.Slog(b, a.Key)
	b = append(b, ':')
	return appendJSONValue(b, a.Value)
}

func appendJSONValue(b []byte, v slog.Value) ([]byte, bool) {
	switch v.Kind() {
	case slog.KindString:
		return jsonquote.Slog(b, v.String()), true
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10), true
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10), true
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool()), true
	case slog.KindDuration:
		return strconv.AppendInt(b, int64(v.Duration()), 10), true // slog writes nanoseconds
	case slog.KindTime:
		return appendJSONTime(b, v.Time())
	default:
		return b, false
	}
}

func appendJSONTime(b []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y >= 10000 {
		return b, false
	}
	sec, loc := t.Unix(), t.Location()
	s := lastSecond.Load()
	if s == nil || s.unix != sec || s.loc != loc {
		// The second's text, as RFC3339Nano writes it with no fraction: its date and time (19
		// bytes in the years 0–9999), then its zone (the offset is the same for the whole
		// second: zones change offset on whole seconds).
		whole := t.Add(-time.Duration(t.Nanosecond())).AppendFormat(nil, time.RFC3339Nano)
		s = &second{unix: sec, loc: loc, head: string(whole[:19]), zone: string(whole[19:])}
		lastSecond.Store(s)
	}
	b = append(append(b, '"'), s.head...)
	b = appendFraction(b, t.Nanosecond())
	return append(append(b, s.zone...), '"'), true
}

// second is one second's text in one location, for the lines written in that second: the time
// of a line is the one part of it each line would otherwise format in full (a sixth of the access
// line's encoding in BenchmarkHomeHandler's profile).
type second struct {
	unix       int64
	loc        *time.Location
	head, zone string
}

// lastSecond is the second of the last line written (lines come in time order, mostly).
var lastSecond atomic.Pointer[second]

// appendFraction appends nanoseconds as RFC3339Nano writes them: nothing for none, otherwise
// a dot and up to nine digits, without trailing zeros.
func appendFraction(b []byte, nanos int) []byte {
	if nanos == 0 {
		return b
	}
	var digits [10]byte
	digits[0] = '.'
	for i := 9; i >= 1; i-- {
		digits[i] = byte('0' + nanos%10)
		nanos /= 10
	}
	n := 10
	for digits[n-1] == '0' {
		n--
	}
	return append(b, digits[:n]...)
}

// handle is Handle's path for a record: the fast encoding when it applies, slog's otherwise.
func (h *Handler) handle(ctx context.Context, r slog.Record) error {
	if h.fast {
		if done, err := h.handleFast(r); done {
			return err
		}
	}
	return h.Handler.Handle(ctx, r)
}
