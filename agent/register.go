package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"time"

	"renga.dev/renga/gen/client"
)

// keyIssuerError: the home is not the one the intake key was first sent to (its issuer), so the
// key is not sent there.
type keyIssuerError struct{ issuer, home string }

func (e *keyIssuerError) Error() string {
	return fmt.Sprintf("this intake key was issued by %s, not by the home %s: the organization moved before this agent registered; configure an intake key from %s",
		e.issuer, e.home, e.home)
}

func keyHash(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// registration.json's on-disk form: which key was sent to which home, and when it took.
type registrationFile struct {
	IntakeKeySHA256 string     `json:"intake_key_sha256"`
	Home            string     `json:"home"`
	RegisteredAt    *time.Time `json:"registered_at"`
}

// register sends the intake key, once, to the home that issued it. The home a key was first
// sent to is recorded before sending; a key is never sent to any other home, so an
// organization that moved before this agent registered needs a key from its new deployment.
func (a *Agent) register(ctx context.Context) error {
	var rec registrationFile
	if b, err := os.ReadFile(a.cfg.StateDir + "/" + registrationName); err == nil {
		_ = json.Unmarshal(b, &rec)
	}
	hash := keyHash(a.cfg.IntakeKey)
	if rec.IntakeKeySHA256 == hash && rec.Home != a.home.Home {
		return &keyIssuerError{issuer: rec.Home, home: a.home.Home}
	}
	if rec.IntakeKeySHA256 != hash || rec.Home != a.home.Home {
		rec = registrationFile{IntakeKeySHA256: hash, Home: a.home.Home}
		if err := writeJSONFile(a.cfg.StateDir, registrationName, rec, true); err != nil {
			return &stateError{err}
		}
	}
	c, err := client.NewClientWithResponses(a.home.Home, client.WithHTTPClient(a.hc))
	if err != nil {
		return err
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "unknown"
	}
	if len(host) > 253 {
		host = host[:253]
	}
	r, err := c.RegisterInstallationWithResponse(ctx, client.InstallationRegister{InstallationId: a.identity.InstallationID,
		PublicKey: a.identity.PublicKey(), Hostname: host, Os: runtime.GOOS},
		func(_ context.Context, req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+a.cfg.IntakeKey)
			return nil
		})
	if err != nil {
		return err
	}
	if r.StatusCode() != http.StatusOK && r.StatusCode() != http.StatusCreated {
		return homeError(a.home.Home, r.HTTPResponse, r.Body)
	}
	now := time.Now().UTC()
	rec.RegisteredAt = &now
	if err := writeJSONFile(a.cfg.StateDir, registrationName, rec, true); err != nil {
		return &stateError{err}
	}
	a.registration = Registration{Home: a.home.Home, RegisteredAt: now}
	a.log.Info("registered the installation", "installation_id", a.identity.InstallationID, "home", a.home.Home)
	return nil
}
