// Package secretbox seals the secrets Renga must keep readable (identity providers' client
// secrets) with AES-256-GCM under the deployment's RENGA_SECRET_KEY.
//
// A sealed value is: version byte 1, the first 4 bytes of SHA-256 of the key that sealed it,
// a 12-byte random nonce, and the ciphertext with its tag. The key ID lets a deployment rotate:
// the new key becomes RENGA_SECRET_KEY, the old one moves to RENGA_SECRET_KEY_PREVIOUS, values
// sealed under either open, and new values are sealed under the new one (`renga secret-key
// rotate` re-seals the old ones, after which the previous key can be dropped). The caller's
// associated data binds a sealed value to the row it belongs to.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

const (
	version   = 1
	keyIDSize = 4
	nonceSize = 12
	// KeySize is the size of a key: 32 random bytes (AES-256).
	KeySize = 32
)

type keyID [keyIDSize]byte

// Box seals under its current key and opens under any of its keys.
type Box struct {
	current keyID
	keys    map[keyID]cipher.AEAD
}

// ErrUnknownKey: the value was sealed under a key the box does not hold.
var ErrUnknownKey = errors.New("sealed under a key that is not configured (RENGA_SECRET_KEY, RENGA_SECRET_KEY_PREVIOUS)")

// ErrCorrupt: the value is not one this package sealed, or it was changed.
var ErrCorrupt = errors.New("sealed value is corrupt or bound to another record")

// ParseKey decodes a key: standard base64 of exactly 32 bytes.
func ParseKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, errors.New("must be standard base64")
	}
	if len(k) != KeySize {
		return nil, fmt.Errorf("must decode to %d bytes, not %d (generate one with: head -c 32 /dev/urandom | base64)", KeySize, len(k))
	}
	return k, nil
}

// NewKey returns a new random key in its base64 form.
func NewKey() string {
	k := make([]byte, KeySize)
	_, _ = rand.Read(k) // crypto/rand never fails on Linux
	return base64.StdEncoding.EncodeToString(k)
}

// New is a box that seals under current and also opens values sealed under previous.
func New(current []byte, previous ...[]byte) (*Box, error) {
	b := &Box{keys: map[keyID]cipher.AEAD{}}
	for i, k := range append([][]byte{current}, previous...) {
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, err
		}
		id := idOf(k)
		if i == 0 {
			b.current = id
		}
		b.keys[id] = aead
	}
	return b, nil
}

func idOf(k []byte) keyID {
	sum := sha256.Sum256(k)
	var id keyID
	copy(id[:], sum[:keyIDSize])
	return id
}

// Seal encrypts plaintext under the current key, bound to associated.
func (b *Box) Seal(plaintext []byte, associated string) []byte {
	out := make([]byte, 1+keyIDSize+nonceSize, 1+keyIDSize+nonceSize+len(plaintext)+16)
	out[0] = version
	copy(out[1:], b.current[:])
	_, _ = rand.Read(out[1+keyIDSize:]) // crypto/rand never fails on Linux
	return b.keys[b.current].Seal(out, out[1+keyIDSize:], plaintext, []byte(associated))
}

// Open decrypts a value Seal made with the same associated data.
func (b *Box) Open(sealed []byte, associated string) ([]byte, error) {
	if len(sealed) < 1+keyIDSize+nonceSize+16 || sealed[0] != version {
		return nil, ErrCorrupt
	}
	var id keyID
	copy(id[:], sealed[1:])
	aead, ok := b.keys[id]
	if !ok {
		return nil, ErrUnknownKey
	}
	nonce := sealed[1+keyIDSize : 1+keyIDSize+nonceSize]
	plain, err := aead.Open(nil, nonce, sealed[1+keyIDSize+nonceSize:], []byte(associated))
	if err != nil {
		return nil, ErrCorrupt
	}
	return plain, nil
}

// Current reports whether sealed was sealed under the current key (rotation re-seals the rest).
func (b *Box) Current(sealed []byte) bool {
	return len(sealed) > 1+keyIDSize && [keyIDSize]byte(sealed[1:1+keyIDSize]) == b.current
}
