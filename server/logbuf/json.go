package logbuf

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
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
	bp := linePool.Get().(*[]byte) //nolint:forcetypeassert // linePool holds nothing else
	defer func() {
		if cap(*bp) <= 1<<12 { // a rare long line's buffer is not kept
			linePool.Put(bp)
		}
	}()
	b, ok := appendJSONRecord((*bp)[:0], r)
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
	b = append(b, '{')
	if !r.Time.IsZero() {
		b = append(b, `"time":`...)
		var ok bool
		if b, ok = appendJSONTime(b, r.Time); !ok {
			return b, false
		}
		b = append(b, ',')
	}
	b = append(b, `"level":`...)
	b = jsonquote.Slog(b, r.Level.String())
	b = append(b, `,"msg":`...)
	b = jsonquote.Slog(b, r.Message)
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "" {
			ok = false // slog leaves out an empty attribute and inlines a group's: not here
			return false
		}
		b = append(b, ',')
		b = jsonquote.Slog(b, a.Key)
		b = append(b, ':')
		b, ok = appendJSONValue(b, a.Value)
		return ok
	})
	return append(b, '}', '\n'), ok
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
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
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
