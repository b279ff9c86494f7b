package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Status is what `renga agent status` prints.
type Status struct {
	InstallationID string    `json:"installation_id"`
	RengaURL       string    `json:"renga_url"`
	Home           string    `json:"home"`
	ResolvedAt     time.Time `json:"resolved_at"`
	Registered     bool      `json:"registered"`
	Stats
	// AsOf is when a running agent wrote these numbers (status.json); zero when they were read
	// from the queue itself.
	AsOf time.Time `json:"as_of"`
}

// Status is the running agent's status.
func (a *Agent) Status() (Status, error) {
	st, err := a.queue.Stats()
	if err != nil {
		return Status{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return Status{InstallationID: a.identity.InstallationID, RengaURL: a.cfg.RengaURL, Home: a.home.Home,
		ResolvedAt: a.home.ResolvedAt, Registered: !a.registration.RegisteredAt.IsZero(), Stats: st}, nil
}

// writeStatus leaves the numbers in status.json for `renga agent status`, which cannot open the
// queue while the agent holds it.
func (a *Agent) writeStatus() {
	s, err := a.Status()
	if err != nil {
		a.log.Warn("cannot read the queue's stats", "error", err.Error())
		return
	}
	s.AsOf = time.Now().UTC()
	if err := writeJSONFile(a.cfg.StateDir, statusName, s, false); err != nil {
		a.log.Warn("cannot write status.json", "error", err.Error())
	}
}

// ReadStatus reads an agent's state directory, whether the agent runs or not: the identity,
// home.json, the registration, and the queue (from status.json while an agent holds it).
func ReadStatus(stateDir string) (Status, error) {
	var s Status
	id, err := LoadIdentity(stateDir)
	if errors.Is(err, fs.ErrNotExist) {
		return s, fmt.Errorf("no installation identity in %s: the agent has not started there yet", stateDir)
	}
	if err != nil {
		return s, err
	}
	s.InstallationID = id.InstallationID
	if h, err := LoadHome(stateDir); err == nil {
		s.RengaURL, s.Home, s.ResolvedAt = h.RengaURL, h.Home, h.ResolvedAt
	}
	if r, err := LoadRegistration(stateDir); err == nil {
		s.Registered = !r.RegisteredAt.IsZero()
	}
	st, err := ReadQueueStats(stateDir)
	switch {
	case err == nil:
		s.Stats = st
	case errors.Is(err, ErrQueueLocked):
		b, err := os.ReadFile(filepath.Join(stateDir, statusName))
		if err != nil {
			return s, fmt.Errorf("the queue is held by a running agent and status.json is unreadable: %w", err)
		}
		var running Status
		if err := json.Unmarshal(b, &running); err != nil {
			return s, fmt.Errorf("%s: %w", statusName, err)
		}
		s.Stats, s.AsOf = running.Stats, running.AsOf
	default:
		return s, err
	}
	return s, nil
}
