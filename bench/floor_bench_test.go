package bench

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"renga.dev/renga/server/db"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// The floor benchmarks answer the same requests as the server's benchmarks with the least a
// correct Go server must do, on the same net/http, pgx pool and database: the same statements
// and round trips as the server, but no router, no validation against the spec, no access log,
// no metrics, no generated code. bench/run.sh prints the server's rate beside them: what the
// pipeline costs, apart from what Go's HTTP server and the database cost. Each floor skips
// guarantees the server keeps (validation, idempotency's digest, audit of failures); it is a
// measuring stick, never a design.

// floorToken checks an operator token as the server does (hash, expiry, revocation, source) and
// runs the batch's other queued statements in the same round trip.
func floorToken(ctx context.Context, pool *pgxpool.Pool, r *http.Request, batch *pgx.Batch) (domain.Token, pgx.BatchResults, bool) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return domain.Token{}, nil, false
	}
	hash := domain.HashSecret(token)
	read := domain.QueueTokenForAuth(batch, hash)
	// The token's statement goes first: move it there.
	batch.QueuedQueries = append(batch.QueuedQueries[len(batch.QueuedQueries)-1:], batch.QueuedQueries[:len(batch.QueuedQueries)-1]...)
	br := pool.SendBatch(ctx, batch)
	t, stored, err := read(br)
	if err != nil || subtle.ConstantTimeCompare(stored, hash) != 1 || !t.Usable(time.Now(), netip.MustParseAddr("127.0.0.1")) {
		_ = br.Close()
		return t, nil, false
	}
	return t, br, true
}

// floorGetServer serves BenchmarkGetOrganization's request with a handler that sends the token
// check and the read in one round trip and writes the organization as JSON.
func floorGetServer(b testing.TB, env *servertest.Env) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := strings.TrimPrefix(r.URL.Path, "/api/v1/operator/organizations/")
		batch := &pgx.Batch{}
		readOrg := domain.QueueGetOrganization(batch, id)
		_, br, ok := floorToken(r.Context(), env.Pool, r, batch)
		if !ok {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		o, err := readOrg(br)
		_ = br.Close()
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("ETag", `"`+strconv.FormatInt(o.Version, 10)+`"`)
		_ = json.NewEncoder(w).Encode(o)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// floorOrganizations creates n organizations directly in the database and returns their IDs.
func floorOrganizations(b testing.TB, env *servertest.Env, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		o, err := domain.CreateOrganization(context.Background(), env.Pool, fmt.Sprint("floor-", i), fmt.Sprint("Floor ", i))
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = o.ID
	}
	return ids
}

// BenchmarkFloorGetOrganization: BenchmarkGetOrganization's request, served by floorGetServer.
func BenchmarkFloorGetOrganization(b *testing.B) {
	env := servertest.Start(b)
	token := env.Token(b, "organizations:read")
	ids := floorOrganizations(b, env, 100)
	srv := floorGetServer(b, env)
	c := httpClient()
	var n atomic.Int64
	b.SetParallelism(4)
	cpu := startCPU(b, env.Pool)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/operator/organizations/"+ids[n.Add(1)%int64(len(ids))], nil)
			req.Header.Set("Authorization", "Bearer "+token)
			do(b, c, req, http.StatusOK)
		}
	})
	reportRate(b, start)
	cpu.report(b, b.N)
}

// BenchmarkFloorCreateOrganization: BenchmarkCreateOrganization's request, served by a handler
// making the server's round trip for a token it has seen: the token checked against memory
// (hash, expiry, source); then, in one round trip (one implicit transaction), the credential's
// lock and re-check, the key's lock and the check that no result is stored under it
// (domain.QueueWriteChecks), the create, the stored result and the audit event.
func BenchmarkFloorCreateOrganization(b *testing.B) {
	for _, clients := range []int{1, 8} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { floorCreate(b, clients) })
	}
}

func floorCreate(b *testing.B, clients int) {
	env := servertest.Start(b)
	token := env.Token(b, "organizations:write")
	postOrganizations(b, floorCreateServer(b, env, token).URL, env.Pool, token, clients)
}

// floorCreateServer serves POST /api/v1/operator/organizations the floor's way for token, one
// of env's operator tokens with organizations:write.
func floorCreateServer(b testing.TB, env *servertest.Env, token string) *httptest.Server {
	ctx := context.Background()
	known, err := floorKnownToken(ctx, env.Pool, token)
	if err != nil {
		b.Fatal(err)
	}
	knownHash := domain.HashSecret(token)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		presented, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if subtle.ConstantTimeCompare(domain.HashSecret(presented), knownHash) != 1 ||
			!known.Usable(time.Now(), netip.MustParseAddr("127.0.0.1")) {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		t := known
		body, _ := io.ReadAll(r.Body)
		var in struct {
			Slug        string `json:"slug"`
			DisplayName string `json:"display_name"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		keyHash := domain.HashSecret(r.Header.Get("Idempotency-Key"))
		digest := sha256.Sum256(body)
		k := &domain.IdempotencyKey{ActorID: t.ID, Method: r.Method, Route: "/api/v1/operator/organizations", KeyHash: keyHash, Digest: digest[:]}
		var out []byte
		err := db.WithWriteTx(ctx, env.Pool, func(tx *db.WriteTx) (*pgx.Batch, error) {
			last := &pgx.Batch{}
			if err := domain.QueueWriteChecks(last, domain.Writer{ActorType: domain.ActorOperatorToken, CredentialID: t.ID}, k); err != nil {
				return nil, err
			}
			o, sql, args := domain.DeferredOrganizationCreate(in.Slug, in.DisplayName, time.Now().UTC().Truncate(time.Microsecond))
			var err error
			if out, err = json.Marshal(o); err != nil {
				return nil, err
			}
			last.Queue(sql, args...)
			e := &domain.AuditEvent{RequestID: "req", ActorType: domain.ActorOperatorToken, ActorID: t.ID, ActorName: t.Name,
				Operation: "createOrganization", Outcome: domain.OutcomeSucceeded, Status: http.StatusCreated,
				OrganizationID: &o.ID, OrganizationNameSnapshot: &o.DisplayName, ChangedFields: []string{"slug", "display_name"}}
			return last, domain.FinishWrite(last, k, &domain.StoredResult{Status: http.StatusCreated, Headers: map[string]string{},
				Body: out, Expires: time.Now().Add(24 * time.Hour)}, e)
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write(out)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// floorKnownToken reads a token once, as a server that has seen it holds it in memory.
func floorKnownToken(ctx context.Context, pool *pgxpool.Pool, secret string) (domain.Token, error) {
	batch := &pgx.Batch{}
	read := domain.QueueTokenForAuth(batch, domain.HashSecret(secret))
	br := pool.SendBatch(ctx, batch)
	t, _, err := read(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return t, err
}

// BenchmarkFloorIntake: BenchmarkIntake's signed batches, served by a handler that verifies the
// signature with the installation's public key read from memory (no round trip: the least a
// server could do) and stores the batch as the server does: its statement, in groups under load
// (domain.IntakeGroups, with the server's default of 2 statements at once).
func BenchmarkFloorIntake(b *testing.B) {
	env := servertest.Start(b)
	agents := registerAgents(b, env, 16)
	runIntake(b, floorIntakeServer(b, env, agents).URL, env.Pool, agents)
}

// floorIntakeServer serves agents' POST /api/v1/agent/observations the floor's way: their keys
// read once, the signature verified, the batch's ID decoded, the batch stored by intake's group
// commit (domain.IntakeGroups).
func floorIntakeServer(b testing.TB, env *servertest.Env, agents []agent) *httptest.Server {
	type holder struct {
		pub     ed25519.PublicKey
		orgID   string
		version int64
	}
	keys := map[string]holder{}
	for _, a := range agents {
		h, err := domain.InstallationForAuth(context.Background(), env.Pool, a.id)
		if err != nil {
			b.Fatal(err)
		}
		keys[a.id] = holder{h.Installation.PublicKey, h.Org.ID, h.PolicyVersion}
	}
	groups := domain.NewIntakeGroups(env.Pool, 2, 1<<20, domain.IntakeGroupUnderLoad)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id, ts := r.Header.Get("Renga-Installation"), r.Header.Get("Renga-Timestamp")
		sig, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(r.Header.Get("Renga-Signature"), "ed25519="))
		h, ok := keys[id]
		if !ok || !ed25519.Verify(h.pub, []byte(domain.StringToSign(r.Method, r.URL.RequestURI(), ts, id, body)), sig) {
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		var in struct {
			BatchID string `json:"batch_id"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fresh, err := groups.Submit(r.Context(), domain.IntakeBatch{OrganizationID: h.orgID, InstallationID: id,
			BatchID: in.BatchID, Body: body, Bytes: int64(len(body)), PublicKey: h.pub, PolicyVersion: h.version}, 1<<50, 64<<20)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = fmt.Fprintf(w, `{"accepted":1,"duplicate":%t}`, !fresh)
	}))
	b.Cleanup(srv.Close)
	return srv
}
