// Package domain holds the deployment's domain functions. Each takes a db.DBTX so that HTTP
// handlers (inside the mutation transaction), workers and release commands share them.
package domain

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
)

// TokenPrefix starts every operator token.
const TokenPrefix = "renga_operator_"

// Scopes are the operator scopes (DESIGN §3.4). A write scope includes its read scope.
var Scopes = []string{
	"deployment:read",
	"organizations:read", "organizations:write",
	"policies:read", "policies:write",
	"providers:read", "providers:write",
	"usage:read",
	"support:read", "support:write",
	"transfers:read", "transfers:write",
	"audit:read",
}

// ScopeAuthenticated marks operations that need a valid token and no scope.
const ScopeAuthenticated = "authenticated"

// secretEncoding is lowercase base32 without padding: no "_" so the token splits unambiguously.
var secretEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewSecret returns 32 random bytes, encoded without "_".
func NewSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return secretEncoding.EncodeToString(b[:])
}

// HashSecret is the stored form of a credential: SHA-256 of the whole string.
func HashSecret(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// LooksLikeToken is a cheap syntax check before any database work.
func LooksLikeToken(s string) bool {
	rest, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || len(rest) != 52 {
		return false
	}
	_, err := secretEncoding.DecodeString(rest)
	return err == nil
}

// Token is an operator token's stored description (never its secret).
type Token struct {
	ID             string         `db:"id"`
	Name           string         `db:"name"`
	Scopes         []string       `db:"scopes"`
	AllowedSources []netip.Prefix `db:"allowed_sources"`
	CreatedAt      time.Time      `db:"created_at"`
	ExpiresAt      *time.Time     `db:"expires_at"`
	RevokedAt      *time.Time     `db:"revoked_at"`
}

// HasScope reports whether the token grants scope; a write scope grants its read scope.
func HasScope(granted []string, scope string) bool {
	if slices.Contains(granted, scope) {
		return true
	}
	if base, ok := strings.CutSuffix(scope, ":read"); ok {
		return slices.Contains(granted, base+":write")
	}
	return false
}

// Usable reports whether the token may be used now from addr.
func (t Token) Usable(now time.Time, addr netip.Addr) bool {
	if t.RevokedAt != nil || (t.ExpiresAt != nil && !now.Before(*t.ExpiresAt)) {
		return false
	}
	if len(t.AllowedSources) == 0 {
		return true
	}
	addr = addr.Unmap()
	for _, p := range t.AllowedSources {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// NewToken describes a token to mint.
type NewToken struct {
	Name           string
	Scopes         []string
	ExpiresAt      *time.Time
	AllowedSources []netip.Prefix
}

// CreateToken mints a token and returns it with its secret, which is never stored.
func CreateToken(ctx context.Context, q db.DBTX, n NewToken) (Token, string, error) {
	if strings.TrimSpace(n.Name) == "" || len(n.Name) > 100 {
		return Token{}, "", fmt.Errorf("%w: name must be 1 to 100 characters", ErrInvalidToken)
	}
	if len(n.Scopes) == 0 {
		return Token{}, "", fmt.Errorf("%w: give at least one scope (known: %s)", ErrInvalidToken, strings.Join(Scopes, ", "))
	}
	scopes := slices.Clone(n.Scopes)
	slices.Sort(scopes)
	scopes = slices.Compact(scopes)
	for _, s := range scopes {
		if !slices.Contains(Scopes, s) {
			return Token{}, "", fmt.Errorf("%w: unknown scope %q (known: %s)", ErrInvalidToken, s, strings.Join(Scopes, ", "))
		}
	}
	allowed := n.AllowedSources
	if allowed == nil {
		allowed = []netip.Prefix{}
	}
	for i, p := range allowed {
		allowed[i] = p.Masked()
	}
	secret := TokenPrefix + NewSecret()
	rows, err := q.Query(ctx, `INSERT INTO operator_tokens (id, name, token_hash, scopes, allowed_sources, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+tokenColumns,
		db.NewID("tok"), n.Name, HashSecret(secret), scopes, allowed, n.ExpiresAt)
	if err != nil {
		return Token{}, "", err
	}
	t, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Token])
	if err != nil {
		return Token{}, "", db.Translate(err)
	}
	return t, secret, nil
}

const tokenColumns = `id, name, scopes, allowed_sources, created_at, expires_at, revoked_at`

// ListTokens lists every token, newest first.
func ListTokens(ctx context.Context, q db.DBTX) ([]Token, error) {
	rows, err := q.Query(ctx, `SELECT `+tokenColumns+` FROM operator_tokens ORDER BY id DESC`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Token])
}

// TokenLockKey is the advisory lock a token's writes share and its revocation takes alone.
func TokenLockKey(id string) int64 {
	h := sha256.Sum256([]byte("operator-token:" + id))
	return int64(binary.BigEndian.Uint64(h[:8]))
}

// RevokeToken revokes a token; revoking a revoked token is success (target state). Call it in a
// transaction: it waits, on the token's advisory lock, for the token's writes in flight, and
// writes that start after it see the token revoked.
func RevokeToken(ctx context.Context, q db.DBTX, id string) (Token, error) {
	if _, err := q.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, TokenLockKey(id)); err != nil {
		return Token{}, err
	}
	rows, err := q.Query(ctx, `UPDATE operator_tokens SET revoked_at = coalesce(revoked_at, now())
		WHERE id = $1 RETURNING `+tokenColumns, id)
	if err != nil {
		return Token{}, err
	}
	t, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Token])
	return t, db.Translate(err)
}

// QueueTokenForAuth queues, on b, the lookup of a token by the hash of its secret; the returned
// function reads the token and its stored hash (for a constant-time compare) from b's results.
// Authentication sends it in one round trip with the read its request will make, if any.
func QueueTokenForAuth(b *pgx.Batch, hash []byte) func(pgx.BatchResults) (Token, []byte, error) {
	b.Queue(tokenForAuth, hash)
	return func(br pgx.BatchResults) (Token, []byte, error) {
		var t Token
		var stored []byte
		err := br.QueryRow().Scan(&t.ID, &t.Name, &t.Scopes, &t.AllowedSources, &t.CreatedAt, &t.ExpiresAt, &t.RevokedAt, &stored)
		if err != nil {
			return Token{}, nil, db.Translate(err)
		}
		return t, stored, nil
	}
}

const tokenForAuth = `SELECT id, name, scopes, allowed_sources, created_at, expires_at, revoked_at, token_hash
		FROM operator_tokens WHERE token_hash = $1`

// TokenByID reads one token.
func TokenByID(ctx context.Context, q db.DBTX, id string) (Token, error) {
	rows, err := q.Query(ctx, `SELECT `+tokenColumns+` FROM operator_tokens WHERE id = $1`, id)
	if err != nil {
		return Token{}, err
	}
	t, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Token])
	return t, db.Translate(err)
}
