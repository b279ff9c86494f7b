package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"renga.dev/renga/server"
	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
)

// The dev token: `renga serve --dev` keeps one full-scope operator token per data directory
// instead of minting a new one at every start. Its ID and secret are recorded in
// DataDir/dev-token (mode 0600: the secret is only known when the token is minted, and a
// development deployment's data directory already holds its whole database). A start reuses the
// recorded token while it authenticates, has every scope and has more than devTokenMinLife
// left; otherwise it revokes the recorded token (if this database has it) and mints a new one.
// So the shells that exported it keep working across restarts, and at most one dev token is
// valid at a time.

const (
	devTokenLifetime = 7 * 24 * time.Hour
	devTokenMinLife  = 24 * time.Hour
	devTokenFile     = "dev-token"
)

// devTokenRecord is what DataDir/dev-token holds.
type devTokenRecord struct {
	ID    string `json:"id"`
	Token string `json:"token"`
}

// devToken returns the dev token to print, and whether it is the recorded one reused.
func devToken(ctx context.Context, pool *pgxpool.Pool, dataDir string, now time.Time) (domain.Token, string, bool, error) {
	path := filepath.Join(dataDir, devTokenFile)
	var rec devTokenRecord
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return domain.Token{}, "", false, err
	default:
		// A record that does not parse is replaced below like a stale one.
		_ = json.Unmarshal(b, &rec)
	}
	if rec.Token != "" {
		t, err := tokenBySecret(ctx, pool, rec.Token)
		if err != nil && !errors.Is(err, db.ErrNotFound) {
			return domain.Token{}, "", false, err
		}
		if err == nil && t.ID == rec.ID && t.RevokedAt == nil && t.ExpiresAt != nil && t.ExpiresAt.Sub(now) > devTokenMinLife &&
			hasEveryScope(t.Scopes) {
			return t, rec.Token, true, nil
		}
	}
	expires := now.Add(devTokenLifetime)
	var t domain.Token
	var secret string
	err = db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		if rec.ID != "" {
			old, err := domain.RevokeToken(ctx, tx, rec.ID)
			switch {
			case errors.Is(err, db.ErrNotFound):
				// Recorded for another database: nothing to revoke here.
			case err != nil:
				return err
			default:
				if err := domain.RecordAudit(ctx, tx, domain.ReleaseAudit(invocationID, "revokeOperatorToken", old.ID,
					domain.OutcomeSucceeded, []string{"revoked_at"})); err != nil {
					return err
				}
			}
		}
		var err error
		t, secret, err = domain.CreateToken(ctx, tx, domain.NewToken{Name: "dev", Scopes: domain.Scopes, ExpiresAt: &expires})
		if err != nil {
			return err
		}
		return domain.RecordAudit(ctx, tx, domain.ReleaseAudit(invocationID, "createOperatorToken", t.ID, domain.OutcomeSucceeded,
			[]string{"name", "scopes", "expires_at"}))
	})
	if err != nil {
		return domain.Token{}, "", false, err
	}
	if err := writeDevTokenRecord(path, devTokenRecord{ID: t.ID, Token: secret}); err != nil {
		return domain.Token{}, "", false, err
	}
	return t, secret, false, nil
}

// tokenBySecret reads the token a secret authenticates as.
func tokenBySecret(ctx context.Context, pool *pgxpool.Pool, secret string) (domain.Token, error) {
	b := &pgx.Batch{}
	read := domain.QueueTokenForAuth(b, domain.HashSecret(secret))
	br := pool.SendBatch(ctx, b)
	t, _, err := read(br)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return t, err
}

func hasEveryScope(granted []string) bool {
	for _, s := range domain.Scopes {
		if !slices.Contains(granted, s) {
			return false
		}
	}
	return true
}

// writeDevTokenRecord replaces the record atomically, readable by this user only.
func writeDevTokenRecord(path string, rec devTokenRecord) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), devTokenFile+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// printDevToken prints the dev token on stdout (never through the logger: logs carry no
// secrets), with the export lines that use this deployment from another shell.
func printDevToken(ctx context.Context, f *Factory, pool *pgxpool.Pool, cfg server.Config, addr net.Addr) error {
	t, secret, reused, err := devToken(ctx, pool, cfg.DataDir, time.Now())
	if err != nil {
		return err
	}
	base := cfg.PublicURL
	if tcp, ok := addr.(*net.TCPAddr); ok && cfg.Listen != "" && tcp.Port != 0 {
		base = fmt.Sprintf("http://127.0.0.1:%d", tcp.Port)
	}
	origin := "minted for this data directory"
	if reused {
		origin = "the one an earlier start minted"
	}
	fmt.Fprintf(f.Stdout, `
Renga is running in development mode at %s (database: %s).
Paste these lines in another shell to use it (release-only commands, such as operator-token
create, use RENGA_DATABASE_URL):

    export RENGA_URL=%s
    export RENGA_OPERATOR_TOKEN=%s
    export RENGA_DATABASE_URL=%s

The operator token (%s, full scope, expires %s) is %s:
it is recorded in %s and reused at each start until a day before it expires.
Then try: %[10]s org create acme --display-name "Acme Corporation" && %[10]s audit list
`, base, redactURL(cfg.DatabaseURL), base, secret, shellQuote(cfg.DatabaseURL), t.ID, t.ExpiresAt.UTC().Format(time.RFC3339),
		origin, filepath.Join(cfg.DataDir, devTokenFile), os.Args[0])
	return nil
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_@%+=:,./-]+$`)

// shellQuote makes s one word for a POSIX shell.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
