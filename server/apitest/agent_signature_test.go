package apitest

import (
	"crypto/ed25519"
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	"renga.dev/renga/server/servertest"
)

// Agent acceptance (issue 5, RFD 23): signed installation requests. Everything here is signed by
// the spec-only client (specclient_test.go).

// earlyInSecond waits, if need be, until the current second is less than half gone, so that a
// timestamp computed now stays on the same side of a window's edge while the request travels.
func earlyInSecond() time.Time {
	if ns := time.Now().Nanosecond(); ns > 500_000_000 {
		time.Sleep(time.Duration(1_000_000_000-ns) + 5*time.Millisecond)
	}
	return time.Now()
}

// TestSignatureSuite: a valid signature works; a tampered body, path or method, a timestamp
// outside ±300 s, another installation's key, a missing header or a malformed signature are all
// 401 unauthenticated, and nothing of those requests is stored.
func TestSignatureSuite(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	s := newAgentSetup(t, env)
	a := s.Agent
	sameOrg := register(t, env, env, s.Key)
	otherOrg := newAgentSetup(t, env).Agent
	stranger := newSpecAgent(env) // never registered

	// Control: a valid signed batch is accepted, also near both edges of the window.
	if r := a.submit(t, batchBody("valid", 1, 0)).accepted(t); r.Duplicate || r.Accepted != 1 {
		t.Errorf("valid batch: %+v", r)
	}
	for _, skew := range []time.Duration{-250 * time.Second, 250 * time.Second} {
		body := batchBody("skew"+strconv.Itoa(int(skew.Seconds())), 1, 0)
		send(t, env, req{Method: http.MethodPost, Path: observationsURL, Body: body,
			Header: a.sign(http.MethodPost, observationsURL, body, time.Now().Add(skew))}).accepted(t)
	}

	type attempt struct {
		name   string
		method string
		path   string
		body   []byte
		header http.Header
	}
	var attempts []attempt
	batch := func(name string) []byte { return batchBody("bad-"+name, 1, 0) }
	post := func(name string, body []byte, h http.Header) {
		attempts = append(attempts, attempt{name, http.MethodPost, observationsURL, body, h})
	}
	now := earlyInSecond()

	{
		signed, sent := batch("body"), batchBody("bad-body", 2, 0)
		post("tampered body", sent, a.sign(http.MethodPost, observationsURL, signed, now))
	}
	{
		body := batch("body-dropped")
		attempts = append(attempts, attempt{"body signed, none sent", http.MethodPost, observationsURL, nil,
			a.sign(http.MethodPost, observationsURL, body, now)})
	}
	{
		body := batch("path-query")
		post("signed with a query, sent without", body, a.sign(http.MethodPost, observationsURL+"?x=1", body, now))
	}
	{
		body := batch("path-other")
		post("signed for another path", body, a.sign(http.MethodPost, agentJobsURL, body, now))
	}
	{
		body := batch("path-added-query")
		attempts = append(attempts, attempt{"signed without a query, sent with one", http.MethodPost, observationsURL + "?x=1", body,
			a.sign(http.MethodPost, observationsURL, body, now)})
	}
	{
		body := batch("method")
		post("signed for another method", body, a.sign(http.MethodPut, observationsURL, body, now))
	}
	{
		body := batch("old")
		post("timestamp 301 s old", body, a.sign(http.MethodPost, observationsURL, body, now.Add(-301*time.Second)))
	}
	{
		body := batch("future")
		post("timestamp 301 s ahead", body, a.sign(http.MethodPost, observationsURL, body, now.Add(301*time.Second)))
	}
	{
		body := batch("very-old")
		post("timestamp a day old", body, a.sign(http.MethodPost, observationsURL, body, now.Add(-24*time.Hour)))
	}
	{
		body := batch("same-org-key")
		post("another installation's key (same organization)", body,
			signAs(env, sameOrg.Priv, a.ID, http.MethodPost, observationsURL, body, now))
	}
	{
		body := batch("other-org-key")
		post("another organization's installation's key", body,
			signAs(env, otherOrg.Priv, a.ID, http.MethodPost, observationsURL, body, now))
	}
	{
		// Signed by A as A, but the header claims B.
		body := batch("claims-other")
		h := a.sign(http.MethodPost, observationsURL, body, now)
		h.Set("Renga-Installation", sameOrg.ID)
		post("valid signature presented for another installation", body, h)
	}
	{
		body := batch("unknown")
		post("unknown installation", body, stranger.sign(http.MethodPost, observationsURL, body, now))
	}
	for _, missing := range []string{"Renga-Installation", "Renga-Timestamp", "Renga-Signature"} {
		body := batch("missing-" + missing)
		h := a.sign(http.MethodPost, observationsURL, body, now)
		h.Del(missing)
		post("missing "+missing, body, h)
	}
	{
		body := batch("no-headers")
		post("no signature headers", body, http.Header{})
	}
	malformed := func(name string, edit func(h http.Header, sig []byte)) {
		body := batch("malformed-" + name)
		h := a.sign(http.MethodPost, observationsURL, body, now)
		stamp := h.Get("Renga-Timestamp")
		sig := ed25519.Sign(a.Priv, []byte(specStringToSign(http.MethodPost, observationsURL, stamp, a.ID, body)))
		edit(h, sig)
		if v := h.Get("Renga-Signature"); v != "" {
			agentTrack(env, v)
		}
		post("malformed: "+name, body, h)
	}
	malformed("not base64", func(h http.Header, _ []byte) { h.Set("Renga-Signature", "ed25519=!!not-base64!!") })
	malformed("no ed25519= prefix", func(h http.Header, sig []byte) {
		h.Set("Renga-Signature", base64.StdEncoding.EncodeToString(sig))
	})
	malformed("other scheme", func(h http.Header, sig []byte) {
		h.Set("Renga-Signature", "rsa="+base64.StdEncoding.EncodeToString(sig))
	})
	malformed("truncated", func(h http.Header, sig []byte) {
		h.Set("Renga-Signature", "ed25519="+base64.StdEncoding.EncodeToString(sig[:63]))
	})
	malformed("one bit flipped", func(h http.Header, sig []byte) {
		bad := append([]byte(nil), sig...)
		bad[7] ^= 1
		h.Set("Renga-Signature", "ed25519="+base64.StdEncoding.EncodeToString(bad))
	})
	malformed("empty", func(h http.Header, _ []byte) { h.Set("Renga-Signature", "ed25519=") })
	malformed("timestamp not decimal seconds", func(h http.Header, _ []byte) {
		h.Set("Renga-Timestamp", h.Get("Renga-Timestamp")+".0")
	})
	malformed("timestamp in milliseconds", func(h http.Header, _ []byte) {
		h.Set("Renga-Timestamp", h.Get("Renga-Timestamp")+"000")
	})
	malformed("installation ID malformed", func(h http.Header, _ []byte) { h.Set("Renga-Installation", "ins_NOPE") })

	// The jobs list (no body) under the same rules.
	jobsOld := a.sign(http.MethodGet, agentJobsURL, nil, now.Add(-301*time.Second))
	attempts = append(attempts, attempt{"jobs: timestamp 301 s old", http.MethodGet, agentJobsURL, nil, jobsOld})
	attempts = append(attempts, attempt{"jobs: another installation's key", http.MethodGet, agentJobsURL, nil,
		signAs(env, sameOrg.Priv, a.ID, http.MethodGet, agentJobsURL, nil, now)})
	attempts = append(attempts, attempt{"jobs: signed with a body digest, sent without", http.MethodGet, agentJobsURL, nil,
		a.sign(http.MethodGet, agentJobsURL, []byte("{}"), now)})

	for _, at := range attempts {
		rep := send(t, env, req{Method: at.method, Path: at.path, Body: at.body, Header: at.header})
		if rep.Status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401 unauthenticated", at.name, rep.Status, rep.Body)
			continue
		}
		rep.expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	}
	var stored []string
	rows, err := env.Pool.Query(t.Context(), `SELECT batch_id FROM observation_batches WHERE batch_id LIKE 'bad-%'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		t.Fatal(err) // a failed query must fail the test, not empty the list
	}
	if len(stored) != 0 {
		t.Errorf("refused requests stored batches %v", stored)
	}
	if n := countRows(t, env, `SELECT count(*) FROM observations WHERE batch_id LIKE 'bad-%'`); n != 0 {
		t.Errorf("refused requests stored %d observations", n)
	}

	// A replay within the window is harmless: deduplicated, never stored twice.
	body := batchBody("replayed", 1, 0)
	h := a.sign(http.MethodPost, observationsURL, body, time.Now())
	for i, wantDup := range []bool{false, true} {
		r := send(t, env, req{Method: http.MethodPost, Path: observationsURL, Body: body, Header: h}).accepted(t)
		if r.Duplicate != wantDup {
			t.Errorf("replay %d: duplicate = %v, want %v", i, r.Duplicate, wantDup)
		}
	}
	if b, o := storedBatch(t, env, a.ID, "replayed"); b != 1 || o != 1 {
		t.Errorf("replayed batch stored %d/%d times", b, o)
	}
	// Unsigned agent requests never reach an installation's data, whatever else they carry.
	send(t, env, req{Method: http.MethodGet, Path: agentJobsURL, Token: s.Key}).expectProblem(t, http.StatusUnauthorized, "unauthenticated")
	send(t, env, req{Method: http.MethodPost, Path: observationsURL, Token: s.Key, Body: batch("intake-key")}).
		expectProblem(t, http.StatusUnauthorized, "unauthenticated")
}

// TestSpecClientRunsTheAgentProtocol: the client written from the spec alone submits
// observations, lists its jobs and reports a result.
func TestSpecClientRunsTheAgentProtocol(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t)
	s := newAgentSetup(t, env)
	a := s.Agent

	if r := a.submit(t, batchBody("spec-1", 2, 10)).accepted(t); r.Accepted != 2 || r.Duplicate {
		t.Errorf("submitObservations: %+v", r)
	}
	job := createJob(t, env, s.Owner, a.ID, "uptime")

	rep := a.do(t, http.MethodGet, agentJobsURL, nil)
	if rep.Status != http.StatusOK {
		t.Fatalf("listAgentJobs: %d %s", rep.Status, rep.Body)
	}
	var jobs struct {
		Items []struct {
			ID      string `json:"id"`
			Command string `json:"command"`
		} `json:"items"`
	}
	rep.decode(t, &jobs)
	if len(jobs.Items) != 1 || jobs.Items[0].ID != job.ID || jobs.Items[0].Command != "uptime" {
		t.Fatalf("listAgentJobs = %s, want the job %s", rep.Body, job.ID)
	}

	result := jsonBody(map[string]any{"status": "succeeded", "exit_code": 0, "output": "up 3 days"})
	rep = a.do(t, http.MethodPost, agentResultURL(job.ID), result)
	if rep.Status != http.StatusOK {
		t.Fatalf("submitJobResult: %d %s", rep.Status, rep.Body)
	}
	var done jobJSON
	rep.decode(t, &done)
	if done.State != "succeeded" || done.Result == nil || done.Result.Output != "up 3 days" {
		t.Errorf("submitJobResult answered %s", rep.Body)
	}
}
