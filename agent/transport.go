package agent

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// newHTTPClient follows no redirects: a 3xx comes back as the response, and the agent treats it
// as an error (RFD 23: a reverse proxy cannot redirect an authenticated request elsewhere).
func newHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:       timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// signer signs every request with the installation's key (openapi.yaml, installationSignature).
type signer struct {
	doer     *http.Client
	identity Identity
	now      func() time.Time
}

func (s signer) Do(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	ts := strconv.FormatInt(s.now().Unix(), 10)
	sig := ed25519.Sign(s.identity.Key, []byte(StringToSign(req.Method, req.URL.RequestURI(), ts, s.identity.InstallationID, body)))
	req.Header.Set("Renga-Installation", s.identity.InstallationID)
	req.Header.Set("Renga-Timestamp", ts)
	req.Header.Set("Renga-Signature", "ed25519="+base64.StdEncoding.EncodeToString(sig))
	return s.doer.Do(req)
}

// HomeError is an answer from the home (or renga_url) that is not the one hoped for.
type HomeError struct {
	URL        string // where the request went
	Status     int
	Code       string // the problem's error code, when the body is problem+json
	Detail     string
	Location   string // a redirect's target, which is never followed
	RetryAfter time.Duration
}

func (e *HomeError) Error() string {
	switch {
	case e.Status >= 300 && e.Status < 400:
		return fmt.Sprintf("%s answered a redirect (%d) to %q: redirects are never followed", e.URL, e.Status, e.Location)
	case e.Code != "":
		return fmt.Sprintf("%s answered %d %s: %s", e.URL, e.Status, e.Code, e.Detail)
	default:
		return fmt.Sprintf("%s answered %d", e.URL, e.Status)
	}
}

// Moved reports a 410 moved: the only answer that makes the agent resolve its home again.
func (e *HomeError) Moved() bool { return e.Status == http.StatusGone && e.Code == "moved" }

// homeError reads an unwanted response.
func homeError(url string, resp *http.Response, body []byte) *HomeError {
	e := &HomeError{URL: url, Status: resp.StatusCode, Location: resp.Header.Get("Location")}
	var p struct {
		Error  string `json:"error"`
		Detail string `json:"detail"`
		Title  string `json:"title"`
	}
	if json.Unmarshal(body, &p) == nil {
		e.Code, e.Detail = p.Error, p.Detail
		if e.Detail == "" {
			e.Detail = p.Title
		}
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// asHomeError unwraps a HomeError.
func asHomeError(err error) (*HomeError, bool) {
	var he *HomeError
	ok := errors.As(err, &he)
	return he, ok
}
