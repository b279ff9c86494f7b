package apitest

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"renga.dev/renga/server"
	"renga.dev/renga/server/domain"
	"renga.dev/renga/server/servertest"
)

// observationIDShape is db.NewID's shape with the prefix obs: 26 Crockford base32 characters,
// the first ten the time.
var observationIDShape = regexp.MustCompile(`^obs_[0-7][0-9a-hjkmnp-tv-z]{25}$`)

// TestObservationIDsCountNothing (issue 58): an organization's observation IDs tell nothing of
// another organization's traffic. Organization A sends batches while B sends many at the same
// time (each alone, and in groups' statements, where A's and B's batches share statements); A's
// IDs are of db.NewID's shape (no number), and each is only the time it was received (the
// received_at the list shows, to the microsecond), random bits drawn for its batch and its place
// in the batch: consecutive observations of a batch differ by one, of two batches by nothing a
// count could make. A's list pages over its observations each once, newest first, a batch's in
// the order sent.
//
// Fails when: IDs come from a sequence (obs_<n>), an ID holds anything but its time, its batch's
// random bits and its place, or two of A's batches' IDs are close (a shared counter), or the
// list repeats, skips or reorders an observation.
func TestObservationIDsCountNothing(t *testing.T) {
	t.Parallel()
	for name, path := range map[string]domain.IntakePath{"alone": domain.IntakeAlone, "groups": domain.IntakeGroupAlways} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := servertest.Start(t, func(c *server.Config) { c.IntakePath = path })
			a, b := newAgentSetup(t, env), newAgentSetup(t, env)
			sizes := []int{3, 1, 4, 2, 5}
			var wg sync.WaitGroup
			wg.Go(func() {
				for i := range 30 {
					if r := b.Agent.submit(t, batchBody(fmt.Sprintf("b%d", i), 10, 0)); r.Status != http.StatusAccepted {
						t.Errorf("B's batch %d: %d %s", i, r.Status, r.Body)
					}
				}
			})
			for i, n := range sizes {
				if r := a.Agent.submit(t, batchBody(fmt.Sprintf("a%d", i), n, 0)); r.Status != http.StatusAccepted {
					t.Errorf("A's batch %d: %d %s", i, r.Status, r.Body)
				}
			}
			wg.Wait()

			obs, _ := listAllObservations(t, env, a.Owner, a.Agent.ID, 4)
			var want []string // batch:seq, newest first
			for i := len(sizes) - 1; i >= 0; i-- {
				for seq := sizes[i] - 1; seq >= 0; seq-- {
					want = append(want, fmt.Sprintf("a%d:%d", i, seq))
				}
			}
			var got []string
			for _, o := range obs {
				got = append(got, fmt.Sprintf("%s:%v", o.BatchID, o.Data["seq"]))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("A's observations over pages of 4:\n got %v\nwant %v", got, want)
			}
			type key struct{ hi, lo uint64 }
			keys := make([]key, len(obs))
			for i, o := range obs {
				id, ok := domain.ParseObservationID(o.ID)
				if !observationIDShape.MatchString(o.ID) || !ok {
					t.Fatalf("observation ID %q: not of db.NewID's shape", o.ID)
				}
				keys[i] = key{binary.BigEndian.Uint64(id[:8]), binary.BigEndian.Uint64(id[8:])}
				received, err := time.Parse(time.RFC3339Nano, o.ReceivedAt)
				if err != nil {
					t.Fatal(err)
				}
				us := received.UnixMicro()
				if keys[i].hi>>16 != uint64(us/1000) || keys[i].hi>>6&1023 != uint64(us%1000) {
					t.Errorf("%s: its time is not its received_at %s", o.ID, o.ReceivedAt)
				}
			}
			for i := 1; i < len(obs); i++ {
				prev, k := keys[i-1], keys[i]
				if obs[i].BatchID == obs[i-1].BatchID {
					if k.hi != prev.hi || k.lo+1 != prev.lo {
						t.Errorf("%s then %s: a batch's observations differ by more than their place", obs[i-1].ID, obs[i].ID)
					}
					continue
				}
				if d := max(k.lo, prev.lo) - min(k.lo, prev.lo); d < 1<<32 {
					t.Errorf("%s (batch %s) then %s (batch %s): %d apart, a count", obs[i-1].ID, obs[i-1].BatchID, obs[i].ID, obs[i].BatchID, d)
				}
			}
		})
	}
}

// TestObservationIDsFromBeforeStillAnswer: an observation stored before migration 00020 (its key
// its number) is listed under the obs_<n> it had, after every newer one, and a page token a list
// gave before, holding an obs_<n>, pages on from it; a token of no observation ID is refused
// with 400 invalid_page_token.
func TestObservationIDsFromBeforeStillAnswer(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	s := newAgentSetup(t, env)
	for _, n := range []int{5, 7, 12} {
		if _, err := env.Pool.Exec(context.Background(), `INSERT INTO observations (id, organization_id, installation_id, batch_id,
			observed_at, received_at, kind, data) VALUES (lpad(to_hex($3::bigint), 32, '0')::uuid, $1, $2, 'old', now(), now() - interval '1 day',
			'host.facts', jsonb_build_object('n', $3::int))`, s.OrgID, s.Agent.ID, n); err != nil {
			t.Fatal(err)
		}
	}
	s.Agent.submit(t, batchBody("new", 2, 0)).accepted(t)
	var ids []string
	obs, _ := listAllObservations(t, env, s.Owner, s.Agent.ID, 2)
	for _, o := range obs {
		ids = append(ids, o.ID)
	}
	if len(ids) != 5 || !observationIDShape.MatchString(ids[0]) || !observationIDShape.MatchString(ids[1]) ||
		!slices.Equal(ids[2:], []string{"obs_12", "obs_7", "obs_5"}) {
		t.Fatalf("observations: %v; want two new IDs, then obs_12, obs_7, obs_5", ids)
	}
	token := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	var page struct {
		Items         []observationJSON `json:"items"`
		NextPageToken *string           `json:"next_page_token"`
	}
	send(t, env, req{Method: http.MethodGet, Path: agentsPath + "/" + s.Agent.ID + "/observations?page_size=1&page_token=" + token("v1:obs_12"),
		Token: s.Owner}).decode(t, &page)
	if len(page.Items) != 1 || page.Items[0].ID != "obs_7" || page.NextPageToken == nil || *page.NextPageToken != token("v1:obs_7") {
		t.Errorf("after the token of obs_12: %+v", page)
	}
	for _, bad := range []string{"v1:obs_0", "v1:obs_007", "v1:obs_99999999999999999999", "v1:obs_00000000000000000000000007",
		"v1:job_01jc3x9m1h7r4v5n8q2w6e0t9y", "v1:obs_81jc3x9m1h7r4v5n8q2w6e0t9y", "obs_7"} {
		send(t, env, req{Method: http.MethodGet, Path: agentsPath + "/" + s.Agent.ID + "/observations?page_token=" + token(bad), Token: s.Owner}).
			expectProblem(t, http.StatusBadRequest, "invalid_page_token")
	}
}

// TestImportedObservationsKeepTheirOrder: an archive carries no observation IDs; an import gives
// its observations new ones of db.NewID's shape, in the archive's order over all its
// observation members, so the destination lists them in the source's order. Fails when an
// import's IDs are drawn per row (order by chance) or restart with each member.
func TestImportedObservationsKeepTheirOrder(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	token := env.Token(t, servertest.AllScopes()...)
	ctx := context.Background()
	o, ins := orgWithInstallation(t, env, token, "Order")
	const rows = 25000 // past one member of about 4 MiB
	if _, err := env.Pool.Exec(ctx, `INSERT INTO observations (organization_id, installation_id, batch_id, observed_at, kind, data)
		SELECT $1, $2, 'b' || (g / 100), now(), 'noise', jsonb_build_object('n', g, 'pad', md5(g::text) || md5((g + 1)::text) || md5((g + 2)::text))
		FROM generate_series(1, $3) g`, o.ID, ins, rows); err != nil {
		t.Fatal(err)
	}
	x := startExport(t, env, token, o.ID)
	if tr, run, err := domain.StartExport(ctx, env.Pool, x.ID); err != nil || !run {
		t.Fatalf("start: %v %v", run, err)
	} else if err := domain.RunExport(ctx, env.Pool, tr, domain.ArchiveSource{PublicURL: env.Config.PublicURL}); err != nil {
		t.Fatal(err)
	}
	archive := download(t, env, token, waitTransfer(t, env, token, x.ID))
	members := 0
	for _, m := range readArchive(t, archive) {
		if strings.HasPrefix(m.Name, "observations/") {
			members++
		}
	}
	if members < 2 {
		t.Fatalf("%d observation members, want several", members)
	}
	dst := servertest.Start(t)
	dstToken := dst.Token(t, servertest.AllScopes()...)
	d := createOrg(t, dst, dstToken, newSlug(), "Order")
	if r := send(t, dst, importReq(dstToken, d.ID, archive)); r.Status != http.StatusCreated {
		t.Fatalf("import: %d %s", r.Status, r.Body)
	}
	list, err := dst.Pool.Query(ctx, `SELECT id, (data->>'n')::int FROM observations WHERE organization_id = $1 ORDER BY id`, d.ID)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for list.Next() {
		var id domain.ObservationID
		var got int
		if err := list.Scan(&id, &got); err != nil {
			t.Fatal(err)
		}
		n++
		if got != n || !observationIDShape.MatchString(id.String()) {
			t.Fatalf("imported observation %d in ID order: %d, ID %s", n, got, id)
		}
	}
	if err := list.Err(); err != nil || n != rows {
		t.Fatalf("%d observations imported, want %d (%v)", n, rows, err)
	}
}
