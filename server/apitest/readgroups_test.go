package apitest

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"renga.dev/renga/server"
	"renga.dev/renga/server/servertest"
)

// TestConcurrentReadsEachGetTheirOwn: authenticated reads that travel together (one read batch
// in flight, RENGA_READ_BATCHES=1, 48 requests at once) each get their own answer: their own
// organization, and their own token's verdict (a revoked token's GETs 401 among the others'
// 200s), and /metrics counts the reads and the batches that carried them.
func TestConcurrentReadsEachGetTheirOwn(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, func(c *server.Config) { c.ReadBatches = 1 })
	writer := env.Token(t, "organizations:write")
	orgs := make([]organization, 12)
	for i := range orgs {
		orgs[i] = createOrg(t, env, writer, fmt.Sprintf("read-group-%d", i), fmt.Sprintf("Read group %d", i))
	}
	_, reader := scopedToken(t, env, "organizations:read")
	_, revoked := scopedToken(t, env, "organizations:read")
	if r := send(t, env, req{Method: http.MethodPost, Path: selfPath + "/revoke", Token: revoked}); r.Status != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", r.Status, r.Body)
	}
	const rounds, clients = 4, 48
	for range rounds {
		var wg sync.WaitGroup
		for i := range clients {
			wg.Go(func() {
				o := orgs[i%len(orgs)]
				token, want := reader, http.StatusOK
				if i%3 == 2 {
					token, want = revoked, http.StatusUnauthorized
				}
				r, err := sendE(env, req{Method: http.MethodGet, Path: orgPath(o.ID), Token: token})
				if err != nil {
					t.Error(err)
					return
				}
				if r.Status != want {
					t.Errorf("GET %s (client %d): %d %s; want %d", o.ID, i, r.Status, r.Body, want)
					return
				}
				if want != http.StatusOK {
					return
				}
				var got organization
				if err := r.decodeE(&got); err != nil || got.ID != o.ID || got.Slug != o.Slug {
					t.Errorf("GET %s (client %d): %+v, %v; want %s", o.ID, i, got, err, o.Slug)
				}
			})
		}
		wg.Wait()
	}
	resp, err := http.Get(env.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	metric := func(name string) int64 {
		m := regexp.MustCompile(`\n` + name + ` (\d+)\n`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("/metrics has no %s", name)
		}
		n, _ := strconv.ParseInt(string(m[1]), 10, 64)
		return n
	}
	reads, batches := metric("renga_reads_total"), metric("renga_read_batches_total")
	if reads < rounds*clients || batches < 1 || batches > reads || metric("renga_waiting_reads") != 0 {
		t.Errorf("reads %d, batches %d; want at least %d reads, at most as many batches", reads, batches, rounds*clients)
	}
	t.Logf("%d reads in %d batches", reads, batches)
}

// TestReadBatchesSetting: RENGA_READ_BATCHES sets how many read batches are in flight at once:
// 2 unless set, a positive integer.
func TestReadBatchesSetting(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]int{"": 2, "1": 1, "8": 8, "0": 0, "-1": 0, "two": 0} {
		cfg, err := server.LoadConfig(func(k string) string {
			if k == "RENGA_READ_BATCHES" {
				return v
			}
			return ""
		}, server.ModeRelease)
		if want == 0 {
			if err == nil || !strings.Contains(err.Error(), "RENGA_READ_BATCHES") {
				t.Errorf("RENGA_READ_BATCHES=%q: err %v, want one naming it", v, err)
			}
		} else if err != nil || cfg.ReadBatches != want {
			t.Errorf("RENGA_READ_BATCHES=%q: %d, err %v; want %d", v, cfg.ReadBatches, err, want)
		}
	}
}
