package pipeline

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// TestLocalTransportStreams: the in-process transport hands the response over as the handler
// writes it; a transport that buffered the response would return only after the handler, which
// here waits for the caller to have read the first part.
func TestLocalTransportStreams(t *testing.T) {
	firstRead := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !From(r.Context()).Local {
			t.Error("the request's state is not local")
		}
		w.Header().Set("Content-Length", "11")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("first"))
		select {
		case <-firstRead:
			_, _ = w.Write([]byte(" after"))
		case <-time.After(5 * time.Second):
			_, _ = w.Write([]byte(" stuck"))
		}
	})
	req, err := http.NewRequest(http.MethodGet, "http://local/x", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&LocalTransport{Handler: h, InvocationID: "inv_1"}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK || resp.ContentLength != 11 {
		t.Fatalf("status %d, length %d", resp.StatusCode, resp.ContentLength)
	}
	first := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, first); err != nil || string(first) != "first" {
		t.Fatalf("first part %q (%v)", first, err)
	}
	close(firstRead)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != " after" {
		t.Errorf("rest %q (%v)", rest, err)
	}

	// A handler that writes nothing answers 200 with an empty body; an error status arrives as it is.
	for _, status := range []int{0, http.StatusConflict} {
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if status != 0 {
				w.WriteHeader(status)
			}
		})
		resp, err := (&LocalTransport{Handler: h}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if want := max(status, http.StatusOK); resp.StatusCode != want || len(b) != 0 {
			t.Errorf("status %d body %q, want %d and none", resp.StatusCode, b, want)
		}
	}
}
