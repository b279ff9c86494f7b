package secretbox

import (
	"bytes"
	"errors"
	"testing"
)

func mustKey(t *testing.T) []byte {
	t.Helper()
	k, err := ParseKey(NewKey())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	k := mustKey(t)
	b, err := New(k)
	if err != nil {
		t.Fatal(err)
	}
	sealed := b.Seal([]byte("client-secret"), "idp:1")
	if bytes.Contains(sealed, []byte("client-secret")) {
		t.Fatal("plaintext visible in the sealed value")
	}
	if again := b.Seal([]byte("client-secret"), "idp:1"); bytes.Equal(again, sealed) {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
	got, err := b.Open(sealed, "idp:1")
	if err != nil || string(got) != "client-secret" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := b.Open(sealed, "idp:2"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("opened under another record's associated data: %v", err)
	}
	flipped := bytes.Clone(sealed)
	flipped[len(flipped)-1] ^= 1
	if _, err := b.Open(flipped, "idp:1"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a flipped byte opened: %v", err)
	}
	if _, err := b.Open(sealed[:10], "idp:1"); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a truncated value opened: %v", err)
	}
}

func TestRotation(t *testing.T) {
	oldKey, newKey := mustKey(t), mustKey(t)
	old, _ := New(oldKey)
	sealed := old.Seal([]byte("s"), "a")

	rotated, err := New(newKey, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rotated.Open(sealed, "a"); err != nil || string(got) != "s" {
		t.Fatalf("value under the previous key: %q, %v", got, err)
	}
	if rotated.Current(sealed) {
		t.Fatal("a value under the previous key reported current")
	}
	if !rotated.Current(rotated.Seal([]byte("s"), "a")) {
		t.Fatal("a new seal is not under the current key")
	}
	onlyNew, _ := New(newKey)
	if _, err := onlyNew.Open(sealed, "a"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("opened without the key that sealed it: %v", err)
	}
}

func TestParseKey(t *testing.T) {
	for _, bad := range []string{"", "not base64!", "c2hvcnQ=", NewKey() + "AAAA"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
}
