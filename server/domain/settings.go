package domain

import (
	"context"
	"encoding/json"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
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
	return readSettings(ctx, q, orgID, "")
}

func readSettings(ctx context.Context, q db.DBTX, orgID, lock string) (SettingsDocument, error) {
	d := SettingsDocument{Settings: DefaultSettings()}
	var raw []byte
	err := q.QueryRow(ctx, `SELECT document, version FROM organization_settings WHERE organization_id = $1 `+lock, orgID).Scan(&raw, &d.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, db.ErrNotFound
	}
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(raw, &d.Settings); err != nil {
		return d, err
	}
	if d.Settings.AllowedEmailDomains == nil {
		d.Settings.AllowedEmailDomains = []string{}
	}
	return d, nil
}

// PutSettings replaces the owners' settings if the stored version is expected. A locked
// setting may only be written with its locked value.
func PutSettings(ctx context.Context, q db.DBTX, orgID string, expected int64, w SettingsWrite, locks LockedSettings) (SettingsDocument, []string, error) {
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
		s.AllowedEmailDomains = slices.Clone(*w.AllowedEmailDomains)
		slices.Sort(s.AllowedEmailDomains)
		s.AllowedEmailDomains = slices.Compact(s.AllowedEmailDomains)
	}
	switch {
	case w.RequireSSO != nil && locks.RequireSSO != nil && *w.RequireSSO != *locks.RequireSSO:
		return SettingsDocument{}, nil, &SettingLockedError{"require_sso"}
	case w.RequireMFA != nil && locks.RequireMFA != nil && *w.RequireMFA != *locks.RequireMFA:
		return SettingsDocument{}, nil, &SettingLockedError{"require_mfa"}
	case w.SessionMaxAgeHours != nil && locks.SessionMaxAgeHours != nil && *w.SessionMaxAgeHours != *locks.SessionMaxAgeHours:
		return SettingsDocument{}, nil, &SettingLockedError{"session_max_age_hours"}
	case w.AllowedEmailDomains != nil && locks.AllowedEmailDomains != nil && !slices.Equal(s.AllowedEmailDomains, sortedCopy(*locks.AllowedEmailDomains)):
		return SettingsDocument{}, nil, &SettingLockedError{"allowed_email_domains"}
	}
	old, err := readSettings(ctx, q, orgID, "FOR UPDATE")
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
	if err := q.QueryRow(ctx, `UPDATE organization_settings SET document = $2, version = version + 1, updated_at = now()
		WHERE organization_id = $1 RETURNING version`, orgID, raw).Scan(&d.Version); err != nil {
		return SettingsDocument{}, nil, err
	}
	var changed []string
	if old.Settings.RequireSSO != s.RequireSSO {
		changed = append(changed, "require_sso")
	}
	if old.Settings.RequireMFA != s.RequireMFA {
		changed = append(changed, "require_mfa")
	}
	if old.Settings.SessionMaxAgeHours != s.SessionMaxAgeHours {
		changed = append(changed, "session_max_age_hours")
	}
	if !slices.Equal(old.Settings.AllowedEmailDomains, s.AllowedEmailDomains) {
		changed = append(changed, "allowed_email_domains")
	}
	return d, changed, nil
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return slices.Compact(c)
}
