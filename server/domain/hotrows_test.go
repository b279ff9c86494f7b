package domain_test

import (
	"context"
	"errors"
	"net/netip"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

func TestMain(m *testing.M) { servertest.Main(m) }

// TestHotRowsRead: the rows read on nearly every request (the operator token that authenticates
// it, the organization by ID) read, in each shape they take in the deployment's own schema, as
// a plain scan of the same row reads them, and an unknown token is not found.
func TestHotRowsRead(t *testing.T) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, servertest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	t.Run("organization", func(t *testing.T) {
		o, err := domain.CreateOrganization(ctx, conn, "hot-rows", "Hot rows")
		if err != nil {
			t.Fatal(err)
		}
		for _, change := range []string{
			``, // as created
			`state = 'suspended', suspended_reason = 'unpaid invoice ✓'`,
			`state = 'deletion_pending', suspended_reason = NULL, purge_after = '2027-01-04 10:11:12.345678+00', version = 9007199254740993`,
			`state = 'active', purge_after = NULL, moving_transfer_id = 'xfr_01'`,
			`display_name = '', created_at = '1999-12-31 23:59:59.999999+00'`,
		} {
			if change != "" {
				if _, err := conn.Exec(ctx, `UPDATE organizations SET `+change+` WHERE id = $1`, o.ID); err != nil {
					t.Fatal(err)
				}
			}
			rows, err := conn.Query(ctx, `SELECT `+domain.OrgColumns+` FROM organizations WHERE id = $1`, o.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !rows.Next() {
				t.Fatal(rows.Err())
			}
			want, err := pgx.RowToStructByName[domain.Organization](rows)
			rows.Close()
			if err != nil {
				t.Fatal(err)
			}
			if read, err := domain.GetOrganization(ctx, conn, o.ID); err != nil || !reflect.DeepEqual(read, want) {
				t.Fatalf("after %q: GetOrganization: %v\n%#v\nwant\n%#v", change, err, read, want)
			}
		}
	})

	t.Run("operator token", func(t *testing.T) {
		later := time.Now().Add(time.Hour)
		for _, n := range []domain.NewToken{
			{Name: "plain", Scopes: []string{"organizations:read"}},
			{Name: "every scope, sources, expiry", Scopes: domain.Scopes, ExpiresAt: &later,
				AllowedSources: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("2001:db8::/48")}},
		} {
			tok, secret, err := domain.CreateToken(ctx, conn, n)
			if err != nil {
				t.Fatal(err)
			}
			for _, revoke := range []bool{false, true} {
				if revoke {
					if _, err := domain.RevokeToken(ctx, conn, tok.ID); err != nil {
						t.Fatal(err)
					}
				}
				hash := domain.HashSecret(secret)
				rows, err := conn.Query(ctx, domain.TokenForAuth, hash)
				if err != nil {
					t.Fatal(err)
				}
				if !rows.Next() {
					t.Fatal(rows.Err())
				}
				var want domain.Token
				var wantHash []byte
				err = rows.Scan(&want.ID, &want.Name, &want.Scopes, &want.AllowedSources, &want.CreatedAt, &want.ExpiresAt, &want.RevokedAt, &wantHash)
				rows.Close()
				if err != nil {
					t.Fatal(err)
				}
				// What authentication reads, through its batch.
				b := &pgx.Batch{}
				read := domain.QueueTokenForAuth(b, hash)
				br := conn.SendBatch(ctx, b)
				authTok, authHash, err := read(br)
				if cerr := br.Close(); err == nil {
					err = cerr
				}
				if err != nil || !reflect.DeepEqual(authTok, want) || !reflect.DeepEqual(authHash, wantHash) {
					t.Fatalf("QueueTokenForAuth: %v %#v", err, authTok)
				}
			}
		}
		// No token for a hash: pgx's ErrNoRows, as db.Translate gives it.
		b := &pgx.Batch{}
		read := domain.QueueTokenForAuth(b, domain.HashSecret("renga_operator_unknown"))
		br := conn.SendBatch(ctx, b)
		_, _, err := read(br)
		_ = br.Close()
		if !errors.Is(err, db.ErrNotFound) {
			t.Fatalf("unknown token: %v, want %v", err, db.ErrNotFound)
		}
	})
}
