package server

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"renga.dev/renga/gen/api"
	"renga.dev/renga/server/problem"
)

func etag(version int64) *string {
	s := `"` + strconv.FormatInt(version, 10) + `"`
	return &s
}

func pageSize(p *int) int {
	if p == nil {
		return 100
	}
	return *p
}

// page trims a result fetched with one extra row and returns the next page token, if any.
func page[T any](items []T, size int, id func(T) string) ([]T, *string) {
	if len(items) <= size {
		return items, nil
	}
	items = items[:size]
	tok := encodePageToken(id(items[len(items)-1]))
	return items, &tok
}

// Page tokens are opaque to clients: a version tag and the last ID seen, base64url-encoded.
func encodePageToken(lastID string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("v1:" + lastID))
}

var idPattern = regexp.MustCompile(`^[a-z]{3}_[0-9a-z]{26}$`)

func decodePageToken(tok, prefix string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	id, ok := strings.CutPrefix(string(b), "v1:")
	if err != nil || !ok || !idPattern.MatchString(id) || !strings.HasPrefix(id, prefix+"_") {
		return "", problem.New(http.StatusBadRequest, api.ErrorCodeInvalidPageToken,
			"page_token is not one this list returned; start again without it.")
	}
	return id, nil
}

func optionalPageToken(tok *string, prefix string) (string, error) {
	if tok == nil {
		return "", nil
	}
	return decodePageToken(*tok, prefix)
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// convert maps between generated and domain types of the same JSON shape.
func convert[T any](v any) (T, error) {
	var out T
	b, err := json.Marshal(v)
	if err != nil {
		return out, err
	}
	return out, json.Unmarshal(b, &out)
}
