package pipeline

import (
	"bytes"
	"context"
	"io"
	"net/http"
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

// response turns the recording into a client-side response (the in-process transport).
func (r *recorder) response(req *http.Request) *http.Response {
	return &http.Response{
		Status:        http.StatusText(r.code()),
		StatusCode:    r.code(),
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        r.header,
		Body:          io.NopCloser(bytes.NewReader(r.body.Bytes())),
		ContentLength: int64(r.body.Len()),
		Request:       req,
	}
}

// LocalTransport is an http.RoundTripper that serves requests with Handler in this process, as
// the local operator with one invocation ID: how release commands use the generated client. It
// is the only way a request's state can say Local: nothing on the wire can.
type LocalTransport struct {
	Handler      http.Handler
	InvocationID string
}

// RoundTrip implements http.RoundTripper.
func (t *LocalTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	st := &State{Local: true, Invocation: t.InvocationID}
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
	rec := newRecorder()
	t.Handler.ServeHTTP(rec, r)
	return rec.response(r), nil
}
