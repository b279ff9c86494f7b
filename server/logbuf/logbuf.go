// Package logbuf gathers the server's log lines and writes them together: one write(2) per
// Interval or per Limit bytes instead of one per line. Under load the server writes an access
// line per request, and a system call per line would be a large part of the cheapest requests'
// cost. The lines themselves are log/slog's (NewJSONHandler is slog's JSON handler on a Writer).
//
// What it costs: a line waits at most the interval before it is written, and the lines still
// waiting when the process is killed (SIGKILL, a runtime crash) are lost: at most one interval
// of them. A record at Warn or above is written at once, with every line before it (Handler),
// and the server flushes when it stops. An interval of 0 writes each line as it comes.
package logbuf

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Limit is the most a Writer keeps before it writes.
const Limit = 64 << 10

// Writer keeps what is written to it and writes it to its destination, in order and in one
// write, once Limit bytes wait, once Interval has passed since the first of them, or on Flush.
// Safe for concurrent use; each Write's bytes stay together.
type Writer struct {
	out      io.Writer
	interval time.Duration

	wmu   sync.Mutex // held while writing to out: flushes keep the lines' order
	mu    sync.Mutex // guards buf, armed and err
	buf   []byte
	spare []byte // the buffer being written, or the one to swap in next (under wmu)
	armed bool   // the timer runs
	timer *time.Timer
	err   error // a timed write's error, reported by the next Flush
}

// New returns a Writer that writes to out at most interval after a line arrives; with an
// interval of 0 every Write goes to out at once.
func New(out io.Writer, interval time.Duration) *Writer {
	w := &Writer{out: out, interval: interval}
	if interval > 0 {
		w.buf, w.spare = make([]byte, 0, Limit), make([]byte, 0, Limit)
		w.timer = time.AfterFunc(time.Hour, w.timed)
		w.timer.Stop()
	}
	return w
}

// Write keeps p to be written with the lines around it. A p longer than Limit (or any p, with
// no interval) is written at once, after what waits.
func (w *Writer) Write(p []byte) (int, error) {
	if w.interval <= 0 || len(p) > Limit {
		w.wmu.Lock()
		defer w.wmu.Unlock()
		if err := w.flushLocked(); err != nil {
			return 0, err
		}
		return w.out.Write(p)
	}
	w.mu.Lock()
	for len(w.buf)+len(p) > Limit {
		w.mu.Unlock()
		if err := w.Flush(); err != nil {
			return 0, err
		}
		w.mu.Lock()
	}
	w.buf = append(w.buf, p...)
	if !w.armed {
		w.armed = true
		w.timer.Reset(w.interval)
	}
	w.mu.Unlock()
	return len(p), nil
}

// Flush writes what waits, and returns the error of this write or of an earlier timed one.
func (w *Writer) Flush() error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	return w.flushLocked()
}

// flushLocked writes what waits; w.wmu is held.
func (w *Writer) flushLocked() error {
	if w.interval <= 0 {
		return nil
	}
	w.mu.Lock()
	b := w.buf
	w.buf, w.spare = w.spare[:0], nil
	if w.armed {
		w.armed = false
		w.timer.Stop()
	}
	err := w.err
	w.err = nil
	w.mu.Unlock()
	if len(b) > 0 {
		if _, werr := w.out.Write(b); werr != nil && err == nil {
			err = werr
		}
	}
	w.spare = b[:0]
	return err
}

// timed is the timer's flush. It has no caller to tell of an error: the next Flush reports it.
func (w *Writer) timed() {
	if err := w.Flush(); err != nil {
		w.mu.Lock()
		w.err = err
		w.mu.Unlock()
	}
}

// Handler is h, writing to w, with each record at Warn or above written at once, with every
// line before it: a warning or an error never waits, nor is lost with the process.
type Handler struct {
	slog.Handler
	w *Writer
}

// NewHandler returns h (which writes to w) flushing w after each record at Warn or above.
func NewHandler(h slog.Handler, w *Writer) *Handler { return &Handler{Handler: h, w: w} }

// NewJSONHandler returns log/slog's JSON handler writing to w (slog.NewJSONHandler(w, opts)),
// each record at Warn or above flushed at once (NewHandler).
func NewJSONHandler(w *Writer, opts *slog.HandlerOptions) *Handler {
	return NewHandler(slog.NewJSONHandler(w, opts), w)
}

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	if r.Level >= slog.LevelWarn {
		if ferr := h.w.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{Handler: h.Handler.WithAttrs(attrs), w: h.w}
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{Handler: h.Handler.WithGroup(name), w: h.w}
}
