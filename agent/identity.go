package agent

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Identity is the installation identity (RFD 3): an ID the agent chose and an Ed25519 key pair.
// It is created once, in identity.json (mode 0600), and never changed: after a move the agent's
// signed requests authenticate at its new home because the installation and its public key
// came across in the organization's archive.
type Identity struct {
	InstallationID string
	Key            ed25519.PrivateKey
}

type identityFile struct {
	InstallationID string `json:"installation_id"`
	PrivateKey     string `json:"private_key"` // the 32-byte Ed25519 seed, standard base64
	CreatedAt      string `json:"created_at"`
}

const (
	identityName     = "identity.json"
	registrationName = "registration.json"
	homeName         = "home.json"
	queueName        = "queue.db"
	statusName       = "status.json"
)

// newInstallationID is "ins_" and 26 random characters of 0-9a-z.
func newInstallationID() string {
	const alphabet = "0123456789abcdefghijklmnopqrstuvwxyz"
	var b [26]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "ins_" + string(b[:])
}

// LoadIdentity reads the state directory's identity; fs.ErrNotExist when there is none yet.
func LoadIdentity(stateDir string) (Identity, error) {
	b, err := os.ReadFile(filepath.Join(stateDir, identityName))
	if err != nil {
		return Identity{}, err
	}
	var f identityFile
	if err := json.Unmarshal(b, &f); err != nil {
		return Identity{}, fmt.Errorf("%s: %w", identityName, err)
	}
	seed, err := base64.StdEncoding.DecodeString(f.PrivateKey)
	if err != nil || len(seed) != ed25519.SeedSize || !strings.HasPrefix(f.InstallationID, "ins_") {
		return Identity{}, fmt.Errorf("%s is damaged: restore it from a backup (a new identity would be a new installation)", identityName)
	}
	return Identity{InstallationID: f.InstallationID, Key: ed25519.NewKeyFromSeed(seed)}, nil
}

// loadOrCreateIdentity returns the identity, creating it on first start.
func loadOrCreateIdentity(stateDir string) (Identity, bool, error) {
	id, err := LoadIdentity(stateDir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return id, false, err
	}
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Identity{}, false, err
	}
	id = Identity{InstallationID: newInstallationID(), Key: key}
	f := identityFile{InstallationID: id.InstallationID, PrivateKey: base64.StdEncoding.EncodeToString(key.Seed()),
		CreatedAt: time.Now().UTC().Format(time.RFC3339)}
	if err := writeJSONFile(stateDir, identityName, f, true); err != nil {
		return Identity{}, false, err
	}
	return id, true, nil
}

// PublicKey is the identity's public key in standard base64, as registration sends it.
func (id Identity) PublicKey() string {
	pub, ok := id.Key.Public().(ed25519.PublicKey)
	if !ok {
		panic("ed25519 private key without an ed25519 public key")
	}
	return base64.StdEncoding.EncodeToString(pub)
}

// StringToSign is the signed string of an installation's request (openapi.yaml,
// installationSignature): six lines joined by \n.
func StringToSign(method, requestTarget, timestamp, installationID string, body []byte) string {
	digest := sha256.Sum256(body)
	return strings.Join([]string{"renga-request-v1", method, requestTarget, timestamp, installationID, hex.EncodeToString(digest[:])}, "\n")
}

// Registration records where the installation registered with the intake key: the home that
// issued the key. The key is sent there once and never again, to that home or any other.
type Registration struct {
	Home         string    `json:"home"`
	RegisteredAt time.Time `json:"registered_at"`
}

// LoadRegistration reads registration.json; fs.ErrNotExist before the first registration.
func LoadRegistration(stateDir string) (Registration, error) {
	var r Registration
	b, err := os.ReadFile(filepath.Join(stateDir, registrationName))
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", registrationName, err)
	}
	return r, nil
}

// writeJSONFile replaces dir/name atomically (a temporary file, fsync, rename, fsync of the
// directory), so a crash leaves the old content or the new, never a torn file.
func writeJSONFile(dir, name string, v any, private bool) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if private {
		mode = 0o600
	}
	tmp, err := os.CreateTemp(dir, "."+name+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}
