package agent_test

import (
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"renga.dev/renga/agent"
)

// RFD 23's behaviour, one row a test, against test servers that record every request.

// A key without an identifier is sent with an empty deployment parameter; one with an
// identifier sends it.
func TestResolutionSendsTheKeysIdentifier(t *testing.T) {
	t.Parallel()
	for ident, wantQuery := range map[string]string{"": "deployment=", "eu1": "deployment=eu1"} {
		d := newFakeDeployment(t, newRegistry(), testKey(ident))
		r := start(t, testConfig(t, d.URL, testKey(ident)), nil)
		eventually(t, "a batch at the home", func() bool { return len(d.sequences()) > 0 })
		r.stop()
		var homeQueries []string
		for _, q := range d.rec.all() {
			if q.Path == "/api/v1/agent/home" {
				homeQueries = append(homeQueries, q.RawQuery)
				if q.Header.Get("Authorization") != "" || q.Header.Get("Renga-Signature") != "" {
					t.Errorf("the home request carried a credential: %v", q.Header)
				}
			}
		}
		if len(homeQueries) != 1 || homeQueries[0] != wantQuery {
			t.Errorf("key with identifier %q: home requests %q, want one %q", ident, homeQueries, wantQuery)
		}
	}
}

// A resolver's 404 is a clear error, and the agent asks again later (with back-off) without
// sending anything anywhere else.
func TestResolverNotFoundRetriesLater(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	resolver := httptest.NewServer(rec.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		problemJSON(w, 404, "not_found")
	})))
	defer resolver.Close()
	r := start(t, testConfig(t, resolver.URL, testKey("nowhere")), nil)
	eventually(t, "a second home request", func() bool { return rec.count(http.MethodGet, "/api/v1/agent/home") >= 3 })
	r.stop()
	if !strings.Contains(r.logs.String(), `no home is known for deployment identifier \"nowhere\" (404); will ask again later`) {
		t.Errorf("no clear error in the log:\n%s", r.logs.String())
	}
	for _, q := range rec.all() {
		if q.Path != "/api/v1/agent/home" || q.RawQuery != "deployment=nowhere" {
			t.Errorf("unexpected request to the resolver: %s %s?%s", q.Method, q.Path, q.RawQuery)
		}
	}
	if _, err := agent.LoadHome(r.cfg.StateDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a home was persisted after 404s: %v", err)
	}
}

// An http home is refused unless allow_insecure_http: the agent never contacts it.
func TestInsecureHomeRefused(t *testing.T) {
	t.Parallel()
	home := newFakeDeployment(t, newRegistry(), testKey("a"))
	rec := &recorder{}
	resolver := httptest.NewTLSServer(rec.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"home": "` + home.URL + `"}`))
	})))
	defer resolver.Close()
	cfg := testConfig(t, resolver.URL, testKey("a"))
	cfg.AllowInsecureHTTP = false
	r := start(t, cfg, &agent.Options{Transport: resolver.Client().Transport})
	eventually(t, "resolution attempts", func() bool { return rec.count(http.MethodGet, "/api/v1/agent/home") >= 2 })
	r.stop()
	if n := len(home.rec.all()); n != 0 {
		t.Errorf("the http home got %d requests", n)
	}
	if !strings.Contains(r.logs.String(), "it must be https unless allow_insecure_http is set") {
		t.Errorf("the refusal is not logged:\n%s", r.logs.String())
	}
	// And an http renga_url without allow_insecure_http does not start.
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.RengaURL = home.URL
	var ce *agent.ConfigError
	if err := cfg.Validate(); !errors.As(err, &ce) || ce.Setting != "renga_url" {
		t.Errorf("http renga_url: %v", err)
	}
}

// A redirect from the home is not followed: the target never sees a request, the batch stays
// queued, and the log says so.
func TestRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	target := newFakeDeployment(t, newRegistry(), testKey(""))
	d := newFakeDeployment(t, newRegistry(), testKey(""))
	d.answer("/api/v1/agent/observations", func(w http.ResponseWriter) bool {
		w.Header().Set("Location", target.URL+"/api/v1/agent/observations")
		w.WriteHeader(http.StatusTemporaryRedirect)
		return true
	})
	r := start(t, testConfig(t, d.URL, testKey("")), nil)
	eventually(t, "retries", func() bool { return d.rec.count(http.MethodPost, "/api/v1/agent/observations") >= 3 })
	r.stop()
	if n := len(target.rec.all()); n != 0 {
		t.Errorf("the redirect target got %d requests", n)
	}
	if !r.logged("redirect not followed") {
		t.Errorf("no log of the redirect:\n%s", r.logs.String())
	}
	st, err := agent.ReadQueueStats(r.cfg.StateDir)
	if err != nil || st.Depth == 0 {
		t.Errorf("queue after redirects: %+v %v", st, err)
	}
	if d.rec.count(http.MethodGet, "/api/v1/agent/home") != 1 {
		t.Errorf("a redirect made the agent resolve again")
	}

	// Nor is a redirect from renga_url's home request followed.
	target2 := newFakeDeployment(t, newRegistry(), testKey(""))
	rec := &recorder{}
	redirecting := httptest.NewServer(rec.wrap(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Redirect(w, req, target2.URL+req.URL.RequestURI(), http.StatusFound)
	})))
	defer redirecting.Close()
	r = start(t, testConfig(t, redirecting.URL, testKey("")), nil)
	eventually(t, "resolution retries", func() bool { return rec.count(http.MethodGet, "/api/v1/agent/home") >= 2 })
	r.stop()
	if n := len(target2.rec.all()); n != 0 {
		t.Errorf("the resolution's redirect target got %d requests", n)
	}
	if !r.logged("redirect not followed") {
		t.Errorf("no log of the resolution's redirect:\n%s", r.logs.String())
	}
}

// The intake key goes only to the home: renga_url (a resolver) sees one unauthenticated home
// request, and the home gets the registration and the signed requests.
func TestKeyNeverSentToRengaURL(t *testing.T) {
	t.Parallel()
	key := testKey("eu1")
	home := newFakeDeployment(t, newRegistry(), key)
	resolver := newFakeDeployment(t, newRegistry(), "")
	resolver.home = home.URL
	r := start(t, testConfig(t, resolver.URL, key), nil)
	eventually(t, "batches at the home", func() bool { return len(home.sequences()) >= 2 })
	r.stop()
	for _, q := range resolver.rec.all() {
		if q.Method != http.MethodGet || q.Path != "/api/v1/agent/home" || q.RawQuery != "deployment=eu1" {
			t.Errorf("renga_url got %s %s?%s", q.Method, q.Path, q.RawQuery)
		}
		for name, vs := range q.Header {
			for _, v := range vs {
				if strings.Contains(v, key) || strings.Contains(v, strings.TrimPrefix(key, "renga_intake_eu1_")) || strings.HasPrefix(name, "Renga-") {
					t.Errorf("renga_url got header %s: %s", name, v)
				}
			}
		}
		if strings.Contains(string(q.Body), "renga_intake") {
			t.Errorf("renga_url got the key in a body")
		}
	}
	keyed := 0
	for _, q := range home.rec.all() {
		if strings.Contains(q.Header.Get("Authorization"), key) {
			keyed++
			if q.Path != "/api/v1/agent/installations" {
				t.Errorf("the key went to %s", q.Path)
			}
		}
	}
	if keyed != 1 {
		t.Errorf("the key was sent %d times, want once (the registration)", keyed)
	}
	// A healthy home: nothing failed (jobs included), so nothing was retried.
	if strings.Contains(r.logs.String(), `"level":"WARN"`) || strings.Contains(r.logs.String(), `"level":"ERROR"`) {
		t.Errorf("warnings or errors against a healthy home:\n%s", r.logs.String())
	}
}

// 401 and 403 do not re-resolve: they are logged and retried at the same home.
func TestUnauthorizedAndForbiddenDoNotResolveAgain(t *testing.T) {
	t.Parallel()
	for status, code := range map[int]string{401: "unauthenticated", 403: "suspended"} {
		d := newFakeDeployment(t, newRegistry(), testKey(""))
		d.answer("/api/v1/agent/observations", func(w http.ResponseWriter) bool { problemJSON(w, status, code); return true })
		r := start(t, testConfig(t, d.URL, testKey("")), nil)
		eventually(t, "retries", func() bool { return d.rec.count(http.MethodPost, "/api/v1/agent/observations") >= 4 })
		r.stop()
		if n := d.rec.count(http.MethodGet, "/api/v1/agent/home"); n != 1 {
			t.Errorf("%d: %d home requests, want 1", status, n)
		}
		if !strings.Contains(r.logs.String(), `"code":"`+code+`"`) || !strings.Contains(r.logs.String(), "not re-resolving") {
			t.Errorf("%d: not logged clearly:\n%s", status, r.logs.String())
		}
		if h, err := agent.LoadHome(r.cfg.StateDir); err != nil || h.Home != d.URL {
			t.Errorf("%d: home after refusals: %+v %v", status, h, err)
		}
	}
}

// 410 moved with a resolver that still answers the same home: the agent backs off (no hot
// loop) and keeps its queue; once the resolver answers another home, the agent continues there
// with the same installation identity, signing, without sending the intake key there.
func TestMovedFollowsTheNewHome(t *testing.T) {
	t.Parallel()
	key := testKey("a")
	reg := newRegistry() // the archive: B knows A's installations and public keys
	a := newFakeDeployment(t, reg, key)
	b := newFakeDeployment(t, reg, "") // B never issued this key
	resolver := newFakeDeployment(t, newRegistry(), "")
	resolver.home = a.URL
	cfg := testConfig(t, resolver.URL, key)
	r := start(t, cfg, nil)
	eventually(t, "batches at A", func() bool { return len(a.sequences()) >= 2 })

	a.answer("/api/v1/agent/observations", func(w http.ResponseWriter) bool { problemJSON(w, 410, "moved"); return true })
	before := resolver.rec.count(http.MethodGet, "/api/v1/agent/home")
	time.Sleep(1500 * time.Millisecond)
	during := resolver.rec.count(http.MethodGet, "/api/v1/agent/home") - before
	// Back-off from 20 ms doubling to 200 ms: about ten in 1.5 s; a hot loop would be thousands.
	if during < 2 || during > 25 {
		t.Errorf("%d home requests in 1.5 s while the resolver answered the moved home", during)
	}
	if !r.logged("renga_url still answers the moved home: backing off") {
		t.Errorf("no back-off logged:\n%s", r.logs.String())
	}
	st, _ := r.Queue().Stats()
	if st.Depth == 0 {
		t.Errorf("the queue is empty during the move")
	}

	resolver.mu.Lock()
	resolver.home = b.URL
	resolver.mu.Unlock()
	eventually(t, "batches at B", func() bool { return len(b.sequences()) >= 3 })
	r.stop()
	if h, err := agent.LoadHome(cfg.StateDir); err != nil || h.Home != b.URL {
		t.Errorf("home after the move: %+v %v", h, err)
	}
	for _, q := range b.rec.all() {
		if q.Header.Get("Authorization") != "" || q.Path == "/api/v1/agent/installations" {
			t.Errorf("B got %s %s with Authorization %q", q.Method, q.Path, q.Header.Get("Authorization"))
		}
		if q.Header.Get("Renga-Installation") != r.InstallationID() {
			t.Errorf("B got a request from %q, want %q", q.Header.Get("Renga-Installation"), r.InstallationID())
		}
	}
	// Every observation arrived once, at A before the move or B after.
	seqs := append(a.sequences(), b.sequences()...)
	slices.Sort(seqs)
	for i, s := range seqs {
		if s != i+1 {
			t.Fatalf("sequences at A and B: %v", seqs)
		}
	}
}

// Deleting home.json forces resolution, even while the agent runs.
func TestDeletingHomeForcesResolution(t *testing.T) {
	t.Parallel()
	d := newFakeDeployment(t, newRegistry(), testKey(""))
	r := start(t, testConfig(t, d.URL, testKey("")), nil)
	eventually(t, "a batch", func() bool { return len(d.sequences()) > 0 })
	if err := os.Remove(filepath.Join(r.cfg.StateDir, "home.json")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a second resolution", func() bool { return d.rec.count(http.MethodGet, "/api/v1/agent/home") == 2 })
	eventually(t, "home.json again", func() bool { _, err := agent.LoadHome(r.cfg.StateDir); return err == nil })
	r.stop()
	if !r.logged("home.json was deleted: resolving again") {
		t.Errorf("not logged:\n%s", r.logs.String())
	}
	if n := strings.Count(r.logs.String(), `"msg":"resolved the home"`); n != 2 {
		t.Errorf("%d resolutions logged, want 2", n)
	}
	// The log line names renga_url, the home and when.
	for _, want := range []string{`"renga_url":"` + d.URL, `"home":"` + d.URL, `"resolved_at":"`} {
		if !strings.Contains(r.logs.String(), want) {
			t.Errorf("resolution log lacks %s", want)
		}
	}
}

// An organization that moved before this agent ever registered: the intake key was issued by
// the first home (recorded before it was sent), so the agent does not carry it to the new
// home; it says why and keeps its queue.
func TestKeyNotCarriedToANewHomeBeforeRegistration(t *testing.T) {
	t.Parallel()
	key := testKey("a")
	reg := newRegistry()
	a := newFakeDeployment(t, reg, key)
	a.answer("/api/v1/agent/installations", func(w http.ResponseWriter) bool { problemJSON(w, 410, "moved"); return true })
	b := newFakeDeployment(t, reg, "")
	resolver := newFakeDeployment(t, newRegistry(), "")
	resolver.home = a.URL
	r := start(t, testConfig(t, resolver.URL, key), nil)
	eventually(t, "the registration refused", func() bool { return a.rec.count(http.MethodPost, "/api/v1/agent/installations") >= 1 })
	resolver.mu.Lock()
	resolver.home = b.URL
	resolver.mu.Unlock()
	eventually(t, "the new home resolved", func() bool { h, err := agent.LoadHome(r.cfg.StateDir); return err == nil && h.Home == b.URL })
	time.Sleep(300 * time.Millisecond)
	r.stop()
	for _, q := range b.rec.all() {
		if strings.Contains(q.Header.Get("Authorization"), key) {
			t.Errorf("the key went to B: %s %s", q.Method, q.Path)
		}
	}
	if !strings.Contains(r.logs.String(), "this intake key was issued by "+a.URL) || !r.logged("the intake key is not sent to this home") {
		t.Errorf("not explained:\n%s", r.logs.String())
	}
	st, _ := agent.ReadQueueStats(r.cfg.StateDir)
	if st.Depth == 0 {
		t.Errorf("the queue was not kept")
	}
}

// Changing renga_url in the configuration resolves again from the new one.
func TestChangedRengaURLResolvesAgain(t *testing.T) {
	t.Parallel()
	first := newFakeDeployment(t, newRegistry(), testKey(""))
	cfg := testConfig(t, first.URL, testKey(""))
	r := start(t, cfg, nil)
	eventually(t, "a batch", func() bool { return len(first.sequences()) > 0 })
	r.stop()
	reg := newRegistry()
	second := newFakeDeployment(t, reg, "")
	first.reg.mu.Lock()
	for id, k := range first.reg.keys {
		reg.keys[id] = k
	}
	first.reg.mu.Unlock()
	cfg.RengaURL = second.URL
	r = start(t, cfg, nil)
	eventually(t, "a batch at the new renga_url", func() bool { return len(second.sequences()) > 0 })
	r.stop()
	if !r.logged("renga_url changed since the home was resolved: resolving again") {
		t.Errorf("not logged:\n%s", r.logs.String())
	}
	if h, _ := agent.LoadHome(cfg.StateDir); h.Home != second.URL || h.RengaURL != second.URL {
		t.Errorf("home.json: %+v", h)
	}
}
