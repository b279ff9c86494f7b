package apiclient

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
)

// KeyRetention is how long the server keeps a keyed result at least (RENGA_IDEMPOTENCY_RETENTION
// may make it longer). Within it, repeating a create with the same key returns the object the
// first attempt made.
const KeyRetention = "24 hours"

// MaxKeyGenerations bounds how many earlier objects made from the same create request within
// the retention window a create walks past (see CreateKey).
const MaxKeyGenerations = 16

// CreateKey derives the Idempotency-Key of a create from the request itself: the resource type,
// the path it is posted to and the canonical JSON of its body. The same configuration always
// yields the same key, in this apply and in the next one, so a create whose response was lost
// after the server committed it is answered from the stored result (within KeyRetention) and
// Terraform adopts that object instead of making a second one.
//
// The same request can legitimately create twice within the window: an object destroyed and
// then created again from the same configuration. The first key then replays the destroyed
// object; the caller recognises it (it is no longer live) and moves on to the next generation,
// whose key is derived the same way with the generation number added. Walking the generations
// is deterministic too, so an interrupted apply still converges.
func CreateKey(resourceType, path string, body any, generation int) (string, error) {
	canon, err := CanonicalJSON(body)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte("create"), []byte(resourceType), []byte(path), canon, []byte(strconv.Itoa(generation))} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return "terraform-" + hex.EncodeToString(h.Sum(nil)), nil
}

// WriteKey derives the Idempotency-Key of a versioned write (a PUT or PATCH with If-Match) from
// the object, the version it replaces and the body. A retry of a write that committed before
// its response was lost replays the stored result instead of failing on the version it bumped.
// The version makes each key single-use: once the write succeeds the version moves on.
func WriteKey(resourceType, path string, version int64, body any) (string, error) {
	canon, err := CanonicalJSON(body)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte("write"), []byte(resourceType), []byte(path), []byte(strconv.FormatInt(version, 10)), canon} {
		h.Write(part)
		h.Write([]byte{0})
	}
	return "terraform-" + hex.EncodeToString(h.Sum(nil)), nil
}

// CanonicalJSON is v as JSON with object keys sorted and no insignificant whitespace.
func CanonicalJSON(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var generic any
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	// encoding/json writes map keys sorted.
	return json.Marshal(generic)
}
