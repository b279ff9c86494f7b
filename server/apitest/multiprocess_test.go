package apitest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"renga.dev/renga/server/servertest"
)

// sendTo sends r to a process (the harness's send talks to env's in-process server).
func sendTo(p *process, r req) (reply, error) {
	hr, err := http.NewRequest(r.Method, p.URL+r.Path, bytes.NewReader(r.Body))
	if err != nil {
		return reply{}, err
	}
	for k, vs := range r.Header {
		hr.Header[k] = vs
	}
	if r.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.Token)
	}
	if r.Body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(hr)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: buf.Bytes()}, err
}

// TestTwoProcesses: two `renga serve` processes on one database behave as one deployment:
// one keyed create executes once across both, one If-Match writer wins across both, and each
// background job (mail) runs once.
func TestTwoProcesses(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	token := env.Token(t, "organizations:write", "audit:read")
	procs := []*process{startProcess(t, env), startProcess(t, env)}

	t.Run("64 identical keyed creates", func(t *testing.T) {
		slug, key := newSlug(), newKey()
		body := jsonBody(map[string]string{"slug": slug, "display_name": "Twice"})
		replies := make([]reply, 64)
		errs := make([]error, 64)
		var wg sync.WaitGroup
		for i := range replies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				replies[i], errs[i] = sendTo(procs[i%2], req{Method: http.MethodPost, Path: orgsPath, Token: token, Body: body,
					Header: headers("Idempotency-Key", key)})
			}()
		}
		wg.Wait()
		replayed := 0
		for i, r := range replies {
			if errs[i] != nil || r.Status != http.StatusCreated {
				t.Fatalf("request %d: %v %d %s", i, errs[i], r.Status, r.Body)
			}
			if !bytes.Equal(r.Body, replies[0].Body) {
				t.Errorf("request %d answered another body:\n%s\n%s", i, r.Body, replies[0].Body)
			}
			if r.Header.Get("Idempotent-Replayed") == "true" {
				replayed++
			}
		}
		if replayed != 63 {
			t.Errorf("%d replays, want 63 (one execution)", replayed)
		}
		var orgs, events int
		ctx := context.Background()
		if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM organizations WHERE slug = $1`, slug).Scan(&orgs); err != nil {
			t.Fatal(err)
		}
		if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events e JOIN organizations o ON o.id = e.organization_id
			WHERE o.slug = $1 AND e.operation = 'createOrganization' AND e.outcome = 'succeeded'`, slug).Scan(&events); err != nil {
			t.Fatal(err)
		}
		if orgs != 1 || events != 1 {
			t.Errorf("%d organizations and %d success audit events, want 1 and 1", orgs, events)
		}
	})

	t.Run("32 If-Match writers", func(t *testing.T) {
		org := createOrg(t, env, token, newSlug(), "Contested")
		codes := make([]int, 32)
		var wg sync.WaitGroup
		for i := range codes {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := sendTo(procs[i%2], renameReq(token, org.ID, fmt.Sprint("Writer ", i)))
				if err == nil {
					codes[i] = r.Status
				}
			}()
		}
		wg.Wait()
		won, stale := 0, 0
		for _, c := range codes {
			switch c {
			case http.StatusOK:
				won++
			case http.StatusPreconditionFailed:
				stale++
			}
		}
		if won != 1 || stale != 31 {
			t.Errorf("%d writers won and %d got 412 (all: %v); want 1 and 31", won, stale, codes)
		}
	})

	t.Run("each mail is sent once", func(t *testing.T) {
		org := createOrg(t, env, token, newSlug(), "Mailed")
		for i := range 10 {
			r, err := sendTo(procs[i%2], req{Method: http.MethodPost, Path: orgPath(org.ID) + "/invitations", Token: token,
				Body: jsonBody(map[string]string{"email": fmt.Sprintf("owner%d@example.com", i)}), Header: headers("Idempotency-Key", newKey())})
			if err != nil || r.Status != http.StatusCreated {
				t.Fatalf("invitation %d: %v %d %s", i, err, r.Status, r.Body)
			}
		}
		var files []string
		for deadline := time.Now().Add(20 * time.Second); ; {
			files = nil
			for _, p := range procs {
				m, _ := filepath.Glob(filepath.Join(p.DataDir, "mail", "*.eml"))
				files = append(files, m...)
			}
			if len(files) >= 10 || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(time.Second) // a duplicate delivery would show by now
		files = nil
		for _, p := range procs {
			m, _ := filepath.Glob(filepath.Join(p.DataDir, "mail", "*.eml"))
			files = append(files, m...)
		}
		if len(files) != 10 {
			t.Errorf("%d mail files across both processes, want 10", len(files))
		}
	})

	t.Run("a purge runs once", func(t *testing.T) {
		org := createOrg(t, env, token, newSlug(), "Purged")
		if r, err := sendTo(procs[0], req{Method: http.MethodPost, Path: orgPath(org.ID) + "/deletion", Token: token}); err != nil || r.Status != http.StatusOK {
			t.Fatalf("schedule deletion: %v %d %s", err, r.Status, r.Body)
		}
		ctx := context.Background()
		var purged int
		for deadline := time.Now().Add(20 * time.Second); purged == 0 && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE organization_id = $1 AND operation = 'purgeOrganization'`,
				org.ID).Scan(&purged); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(2 * time.Second) // both purge workers have run again by now
		var started int
		if err := env.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE operation = 'purgeOrganization'),
			count(*) FILTER (WHERE operation = 'startOrganizationPurge') FROM audit_events WHERE organization_id = $1`,
			org.ID).Scan(&purged, &started); err != nil {
			t.Fatal(err)
		}
		if purged != 1 || started != 1 {
			t.Errorf("purge started %d time(s) and finished %d time(s), want once each", started, purged)
		}
	})

	t.Run("periodic jobs run once per interval", func(t *testing.T) {
		// Each process runs River; only the elected leader enqueues periodic jobs, so the hourly
		// retention jobs (run on start) ran once, not once per process.
		for _, kind := range []string{"idempotency_retention", "usage_retention", "observation_retention"} {
			var n int
			if err := env.Pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = $1`, kind).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 1 {
				t.Errorf("%d %s jobs, want 1", n, kind)
			}
		}
	})

	for i, p := range procs {
		if strings.Contains(p.logs.String(), token) {
			t.Errorf("process %d logged the operator token", i)
		}
	}
}

// TestIntakeLimitAcrossProcesses: near intake_bytes_per_day, batches serialize on the
// organization in PostgreSQL, so two processes taking one organization's batches at once never
// let its total pass the limit, and fill it (docs/api.md: "The agent API").
func TestIntakeLimitAcrossProcesses(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	_, operator := scopedToken(t, env, "policies:write", "usage:read")
	s := newAgentSetup(t, env)
	procs := []*process{startProcess(t, env), startProcess(t, env)}
	size := len(batchBody("b-000000", 1, 900))
	limit := 30*size + size/2
	setPolicy(t, env, operator, s.OrgID, map[string]any{"limits": map[string]any{"intake_bytes_per_day": limit}})

	var (
		mu       sync.Mutex
		accepted int
		wrong    []string
	)
	var wg sync.WaitGroup
	for c := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				body := batchBody(fmt.Sprintf("b-%02d%04d", c, i), 1, 900)
				rep, err := sendTo(procs[c%2], req{Method: http.MethodPost, Path: observationsURL, Body: body,
					Header: s.Agent.sign(http.MethodPost, observationsURL, body, time.Now())})
				mu.Lock()
				switch {
				case err != nil:
					wrong = append(wrong, err.Error())
				case rep.Status == http.StatusAccepted:
					accepted++
				case rep.Status != http.StatusTooManyRequests:
					wrong = append(wrong, fmt.Sprintf("%d %s", rep.Status, rep.Body))
				}
				mu.Unlock()
				if err != nil || rep.Status != http.StatusAccepted {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(wrong) > 0 {
		t.Fatalf("answers other than 202 and 429: %v", wrong)
	}
	u := usageToday(t, env, operator, s.OrgID)
	if u.IntakeBytes > int64(limit) || u.IntakeBytes < int64(limit-size) || u.IntakeRequests != int64(accepted) {
		t.Errorf("%d batches accepted, usage %d requests and %d bytes; want the limit %d filled (within one batch of %d bytes), never passed",
			accepted, u.IntakeRequests, u.IntakeBytes, limit, size)
	}
}
