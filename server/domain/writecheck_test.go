package domain_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// TestWriteChecksRefuseInTheBatch: a write sent in one round trip, its checks first, changes
// nothing when a check does not pass (the token revoked, a result stored under the key), and
// WriteChecksRefused says so; with the checks passed the write lands, and a failure of the
// write's own statement is not taken for a refusal.
func TestWriteChecksRefuseInTheBatch(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, servertest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	tok, _, err := domain.CreateToken(ctx, conn, domain.NewToken{Name: "writer", Scopes: []string{"organizations:write"}})
	if err != nil {
		t.Fatal(err)
	}
	w := domain.Writer{ActorType: domain.ActorOperatorToken, CredentialID: tok.ID}
	key := func(hash string) *domain.IdempotencyKey {
		return &domain.IdempotencyKey{ActorID: tok.ID, Method: "POST", Route: "/organizations", KeyHash: []byte(hash), Digest: []byte("d")}
	}
	// write sends the checks, an insert of an organization with slug, and the result stored
	// under k, in one batch.
	write := func(slug string, k *domain.IdempotencyKey) error {
		b := &pgx.Batch{}
		if err := domain.QueueWriteChecks(b, w, k); err != nil {
			t.Fatal(err)
		}
		_, sql, args := domain.DeferredOrganizationCreate(slug, slug, time.Now())
		b.Queue(sql, args...)
		if err := domain.FinishWrite(b, k, &domain.StoredResult{Status: 201, Expires: time.Now().Add(time.Hour)}, nil); err != nil {
			t.Fatal(err)
		}
		return conn.SendBatch(ctx, b).Close()
	}
	created := func(slug string) bool {
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM organizations WHERE slug = $1`, slug).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}

	if err := write("first", key("k1")); err != nil || !created("first") {
		t.Fatalf("checks passed: %v, created %v", err, created("first"))
	}
	// The same key again: a result is stored under it.
	if err := write("replayed", key("k1")); !domain.WriteChecksRefused(err) || created("replayed") {
		t.Errorf("a stored result: %v, created %v; want a refusal, nothing created", err, created("replayed"))
	}
	// The write's own failure (a slug taken) is no refusal.
	if err := write("first", key("k2")); err == nil || domain.WriteChecksRefused(err) {
		t.Errorf("a taken slug: %v; want its own error, not a refusal", err)
	}
	if _, err := domain.RevokeToken(ctx, conn, tok.ID); err != nil {
		t.Fatal(err)
	}
	for _, k := range []*domain.IdempotencyKey{nil, key("k3")} {
		if err := write("revoked", k); !domain.WriteChecksRefused(err) || created("revoked") {
			t.Errorf("a revoked token (key %v): %v, created %v; want a refusal, nothing created", k != nil, err, created("revoked"))
		}
	}
}
