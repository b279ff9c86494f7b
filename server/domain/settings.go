package domain

import (
	"context"
	"encoding/json"
	"slices"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain/policyfield"
)

// Settings are an organization's security settings, the owners' choice where nothing locks them.
type Settings struct {
	RequireSSO          bool     `json:"require_sso"`
	RequireMFA          bool     `json:"require_mfa"`
	SessionMaxAgeHours  int64    `json:"session_max_age_hours"`
	AllowedEmailDomains []string `json:"allowed_email_domains"`
}

// DefaultSettings are what a field left out of a settings document takes.
func DefaultSettings() Settings {
	return Settings{SessionMaxAgeHours: 24, AllowedEmailDomains: []string{}}
}

// SettingsDocument is the stored settings with their version.
type SettingsDocument struct {
	Settings Settings
	Version  int64
}

// SettingsWrite is a PUT of the settings: nil fields take their defaults.
type SettingsWrite struct {
	RequireSSO          *bool
	RequireMFA          *bool
	SessionMaxAgeHours  *int64
	AllowedEmailDomains *[]string
}

// GetSettings reads the owners' settings document.
func GetSettings(ctx context.Context, q db.DBTX, orgID string) (SettingsDocument, error) {
	return readSettings(ctx, q, orgID, false)
}

var getSettings = readDocumentSQL("organization_settings")

// readSettings reads the settings (the defaults at version 1 while they have no row, see
// readDocumentSQL); forUpdate holds their row, if they have one.
func readSettings(ctx context.Context, q db.DBTX, orgID string, forUpdate bool) (SettingsDocument, error) {
	d := SettingsDocument{Settings: DefaultSettings()}
	var raw []byte
	var err error
	if forUpdate {
		var found bool
		if raw, d.Version, found, err = lockDocument(ctx, q, "organization_settings", orgID); err == nil && !found {
			return readSettings(ctx, q, orgID, false) // the defaults, if the organization is there
		}
	} else {
		err = q.QueryRow(ctx, getSettings, orgID).Scan(&raw, &d.Version)
	}
	if err != nil {
		return d, db.Translate(err)
	}
	if err := json.Unmarshal(raw, &d.Settings); err != nil {
		return d, err
	}
	if d.Settings.AllowedEmailDomains == nil {
		d.Settings.AllowedEmailDomains = []string{}
	}
	return d, nil
}

// Applied is the settings that apply under locks (the locked_settings of a policy document):
// each locked setting takes its locked value, the others are the owners'. It is what the owners
// read, so a document read can be written back unchanged.
func (s Settings) Applied(locks PolicyDocument) Settings {
	if v, ok := locks[policyfield.RequireSSO].(bool); ok {
		s.RequireSSO = v
	}
	if v, ok := locks[policyfield.RequireMFA].(bool); ok {
		s.RequireMFA = v
	}
	if v, ok := locks[policyfield.SessionMaxAgeHours].(int64); ok {
		s.SessionMaxAgeHours = v
	}
	if v, ok := locks[policyfield.AllowedEmailDomains].([]string); ok {
		s.AllowedEmailDomains = sortedCopy(v)
	}
	return s
}

// byField is each of the owners' settings under the locked setting of the same name.
func (s Settings) byField() map[policyfield.Path]any {
	return map[policyfield.Path]any{
		policyfield.RequireSSO:          s.RequireSSO,
		policyfield.RequireMFA:          s.RequireMFA,
		policyfield.SessionMaxAgeHours:  s.SessionMaxAgeHours,
		policyfield.AllowedEmailDomains: s.AllowedEmailDomains,
	}
}

// written is each setting the write sets, under the locked setting of the same name.
func (w SettingsWrite) written() map[policyfield.Path]any {
	out := map[policyfield.Path]any{}
	if w.RequireSSO != nil {
		out[policyfield.RequireSSO] = *w.RequireSSO
	}
	if w.RequireMFA != nil {
		out[policyfield.RequireMFA] = *w.RequireMFA
	}
	if w.SessionMaxAgeHours != nil {
		out[policyfield.SessionMaxAgeHours] = *w.SessionMaxAgeHours
	}
	if w.AllowedEmailDomains != nil {
		out[policyfield.AllowedEmailDomains] = *w.AllowedEmailDomains
	}
	return out
}

// PutSettings replaces the owners' settings if the stored version is expected. A locked
// setting (locks is the locked_settings of a policy document) may be left out (it takes its
// default, which applies once the lock is lifted) or written with its locked value, nothing else.
func PutSettings(ctx context.Context, q db.DBTX, orgID string, expected int64, w SettingsWrite, locks PolicyDocument) (SettingsDocument, []string, error) {
	s := DefaultSettings()
	if w.RequireSSO != nil {
		s.RequireSSO = *w.RequireSSO
	}
	if w.RequireMFA != nil {
		s.RequireMFA = *w.RequireMFA
	}
	if w.SessionMaxAgeHours != nil {
		s.SessionMaxAgeHours = *w.SessionMaxAgeHours
	}
	if w.AllowedEmailDomains != nil {
		s.AllowedEmailDomains = sortedCopy(*w.AllowedEmailDomains)
	}
	if name := lockedSetting(w, locks); name != "" {
		return SettingsDocument{}, nil, &SettingLockedError{name}
	}
	old, err := readSettings(ctx, q, orgID, true)
	if err != nil {
		return SettingsDocument{}, nil, err
	}
	if old.Version != expected {
		return SettingsDocument{}, nil, &VersionMismatchError{Current: old.Version}
	}
	raw, err := json.Marshal(s)
	if err != nil {
		return SettingsDocument{}, nil, err
	}
	d := SettingsDocument{Settings: s}
	if d.Version, err = writeDocument(ctx, q, "organization_settings", orgID, old.Version, raw); err != nil {
		return SettingsDocument{}, nil, err
	}
	return d, changedSettings(old.Settings, s), nil
}

// lockedSetting names the first setting (in the table's order) that w writes with another
// value than the one locks holds, or "".
func lockedSetting(w SettingsWrite, locks PolicyDocument) string {
	written := w.written()
	for _, f := range policyfield.In(policyfield.LockedSettings) {
		v, set := written[f.Path]
		lock, locked := locks[f.Path]
		if set && locked && !sameValue(v, lock) {
			return f.Path.Name()
		}
	}
	return ""
}

// changedSettings names the settings that differ, in the table's order.
func changedSettings(a, b Settings) []string {
	va, vb := a.byField(), b.byField()
	var changed []string
	for _, f := range policyfield.In(policyfield.LockedSettings) {
		if !sameValue(va[f.Path], vb[f.Path]) {
			changed = append(changed, f.Path.Name())
		}
	}
	return changed
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return slices.Compact(c)
}
