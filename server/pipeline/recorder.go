package pipeline

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// recorder buffers a response so that a write can store it (idempotency) and decide its
// transaction's fate before anything reaches the caller.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
}

func (r *recorder) code() int {
	if r.status == 0 {
		return http.StatusOK
	}
	return r.status
}

// flush sends the recorded response to w.
func (r *recorder) flush(w http.ResponseWriter) {
	h := w.Header()
	for k, v := range r.header {
		h[k] = v
	}
	w.WriteHeader(r.code())
	_, _ = w.Write(r.body.Bytes())
}

// LocalTransport is an http.RoundTripper that serves requests with Handler in this process, as
// the local operator with one invocation ID: how release commands use the generated client. It
// is the only way a request's state can say Local: nothing on the wire can.
type LocalTransport struct {
	Handler      http.Handler
	InvocationID string
}

// RoundTrip implements http.RoundTripper. The response streams as the handler writes it (the
// handler runs in its own goroutine), so a release command that downloads an archive writes it
// to its file without holding it in memory; closing the body stops the handler's writes.
func (t *LocalTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	st := &State{Local: true, Invocation: t.InvocationID}
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, started: make(chan struct{})}
	go func() {
		defer func() {
			w.start(http.StatusOK) // a handler that wrote nothing answered 200 with no body
			_ = pw.Close()
		}()
		t.Handler.ServeHTTP(w, r)
	}()
	<-w.started
	length := int64(-1)
	if v := w.sent.Get("Content-Length"); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			length = n
		}
	}
	return &http.Response{Status: http.StatusText(w.status), StatusCode: w.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: pr, ContentLength: length, Request: r}, nil
}

// pipeWriter is the in-process transport's response writer: the status and headers when the
// handler starts its response, then the body through a pipe.
type pipeWriter struct {
	header  http.Header
	sent    http.Header // the headers as they were when the response started
	status  int
	pw      *io.PipeWriter
	started chan struct{}
	once    sync.Once
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(status int) { w.start(status) }

func (w *pipeWriter) start(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.started)
	})
}

func (w *pipeWriter) Write(b []byte) (int, error) {
	w.start(http.StatusOK)
	return w.pw.Write(b)
}
