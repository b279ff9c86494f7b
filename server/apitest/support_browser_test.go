package apitest

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"renga.dev/renga/server/servertest"
)

// chromium is the browser the console's test drives: Debian's chromium (.ci/run installs it).
// Without one the test is skipped, except in CI (CI set), where it fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no chromium on PATH, and CI is set: the browser test must run (.ci/run installs chromium)")
	}
	t.Skip("no chromium on PATH (apt-get install -y chromium); CI runs this test")
	return ""
}

// signedInBrowser starts a headless Chromium (path) and signs alice in through the test OpenID
// Provider's login form on env's /signin. The first call starts the browser and must not carry a
// deadline (it would stop the browser); the context it returns bounds every step after it, so a
// browser that hangs fails the test. The browser stops when t ends.
func signedInBrowser(t *testing.T, env *servertest.Env, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("headless", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(env.Config.PublicURL+"/signin"),
		chromedp.Click(chromedp.CSS(`a[href="/signin?provider=corp"]`), chromedp.NodeVisible),
		// The provider's login form.
		chromedp.SendKeys(chromedp.CSS(`input[name="username"]`), "alice", chromedp.NodeVisible),
		chromedp.Click(chromedp.CSS(`button[type="submit"]`), chromedp.NodeVisible),
		// Back on the deployment, signed in.
		chromedp.WaitVisible(chromedp.CSS(`#who`)),
	); err != nil {
		t.Fatalf("sign in in the browser: %v", err)
	}
	return ctx
}

// TestSupportConsoleInABrowser: in a real headless Chromium, a support person signs in through
// the test OpenID Provider's login form, opens an organization whose owner granted access and
// sees its agents; the owner revokes the grant; the reload is refused and shows nothing.
func TestSupportConsoleInABrowser(t *testing.T) {
	t.Parallel()
	path := chromium(t)
	env := servertest.Start(t, servertest.WithOwnPublicURL())
	op := startOP(t, env)
	signInProvider(t, env, op, "corp")
	s := newAgentSetup(t, env)
	hostname := "host-" + s.Agent.ID[4:10]
	g := grantSupport(t, env, s.Owner, time.Now().Add(time.Hour), "alice@example.com")

	ctx := signedInBrowser(t, env, path)
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
	who := text("#who")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#console`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`#granted`))); err != nil {
		t.Fatalf("open the console: %v", err)
	}
	organizations := text("#granted")
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`#granted a`), chromedp.NodeVisible),
		chromedp.WaitVisible(chromedp.CSS(`#agents`))); err != nil {
		t.Fatalf("open the organization: %v", err)
	}
	agents := text("#agents")
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cookies.Cookies {
		env.Track(c.Value) // the session cookie: never in logs, audit or Activity
	}
	if !strings.Contains(who, "alice@example.com") || !strings.Contains(agents, hostname) || !strings.Contains(agents, s.Agent.ID) {
		t.Fatalf("signed in as %q; organizations %q; agents %q (want %s)", who, organizations, agents, hostname)
	}
	if acts := supportActivity(t, env, s.Owner); len(acts) != 1 || acts[0].Operation != "supportListAgents" || acts[0].Actor.Name != "alice@example.com" {
		t.Errorf("the browser's read in the Activity: %+v", acts)
	}

	if rep := send(t, env, req{Method: http.MethodDelete, Path: supportGrantsPath + "/" + g.ID, Token: s.Owner}); rep.Status != http.StatusOK {
		t.Fatalf("revoke: %d %s", rep.Status, rep.Body)
	}
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#refusal`))); err != nil {
		t.Fatalf("reload after the revocation: %v", err)
	}
	refusal := text("#refusal")
	shown, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(refusal, "No active support grant") || strings.Contains(shown, hostname) || strings.Contains(shown, `id="agents"`) {
		t.Errorf("reload after the revocation: %q; page %s", refusal, shown)
	}
	if acts := supportActivity(t, env, s.Owner); len(acts) != 1 {
		t.Errorf("the refused reload was recorded as a read: %+v", acts)
	}
}

// TestSupportConsoleReadsInOrderInABrowser: text that would turn a console line around (a
// right-to-left override in an organization's name stored before names refused it, in an
// agent's hostname, in an observation's data, which is kept as sent) leaves every line reading
// in order in a real Chromium: each character of the line, as laid out, stands right of the one
// before it, and the override shows as its escape.
func TestSupportConsoleReadsInOrderInABrowser(t *testing.T) {
	t.Parallel()
	path := chromium(t)
	env := servertest.Start(t, servertest.WithOwnPublicURL())
	op := startOP(t, env)
	signInProvider(t, env, op, "corp")
	s := newAgentSetup(t, env)
	ctx := context.Background()
	if _, err := env.Pool.Exec(ctx, `UPDATE organizations SET display_name = $1 WHERE id = $2`, "Acme\u202eZ", s.OrgID); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Pool.Exec(ctx, `UPDATE installations SET hostname = $1 WHERE id = $2`, "web\u202e1gnp.exe", s.Agent.ID); err != nil {
		t.Fatal(err)
	}
	obs := map[string]any{"observed_at": time.Now().UTC().Format(time.RFC3339), "kind": "host.facts",
		"data": map[string]any{"note": "abc\u202edef", "then": "ghi"}}
	s.Agent.submit(t, jsonBody(map[string]any{"batch_id": "rtl", "observations": []any{obs}})).accepted(t)
	grantSupport(t, env, s.Owner, time.Now().Add(time.Hour), "alice@example.com")

	bctx := signedInBrowser(t, env, path)
	cookies, err := chromedp.Call(bctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cookies.Cookies {
		env.Track(c.Value)
	}

	for _, line := range []struct{ page, sel, text string }{
		{"/support", "#granted li", `Acme\u202EZ (s-`},
		{"/support/organizations/" + s.OrgID, "#agents .hostname", `web\u202E1gnp.exe`},
		{"/support/organizations/" + s.OrgID + "/agents/" + s.Agent.ID, "#observations pre", `"abc\u202Edef"`},
	} {
		if err := chromedp.Do(bctx, chromedp.Navigate(env.Config.PublicURL+line.page), chromedp.WaitVisible(chromedp.CSS(line.sel))); err != nil {
			t.Fatalf("open %s: %v", line.page, err)
		}
		laid, err := chromedp.Run(bctx, chromedp.Evaluate[[]laidChar](layoutScript(line.sel)))
		if err != nil {
			t.Fatalf("%s %s: %v", line.page, line.sel, err)
		}
		var read strings.Builder
		for i, c := range laid {
			read.WriteString(c.C)
			if i == 0 {
				continue
			}
			// On the same line (their boxes overlap vertically) a character stands right of the
			// one before it; a wrapped line goes on below.
			prev := laid[i-1]
			sameLine := c.Top < prev.Bottom && prev.Top < c.Bottom
			if sameLine && c.X <= prev.X || !sameLine && c.Top < prev.Bottom {
				t.Errorf("%s %s: %q is not after %q, which comes before it: the line is turned around (%+v)", line.page, line.sel, c.C, prev.C, laid)
				break
			}
		}
		if !strings.Contains(read.String(), strings.ReplaceAll(line.text, " ", "")) {
			t.Errorf("%s %s reads %q, want it to show %q", line.page, line.sel, read.String(), line.text)
		}
	}
}

// laidChar is a character of a page as the browser laid it out: where its box starts.
type laidChar struct {
	C      string  `json:"c"`
	X      float64 `json:"x"`
	Top    float64 `json:"top"`
	Bottom float64 `json:"bottom"`
}

// layoutScript lists the visible characters of the first element sel selects, in the page's
// order, each with the box the browser drew it in (spaces, which have no ink, left out).
func layoutScript(sel string) string {
	return `(() => {
  const el = document.querySelector(` + string(jsonBody(sel)) + `), out = [];
  const w = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let n = w.nextNode(); n; n = w.nextNode()) {
    for (let i = 0; i < n.data.length; i++) {
      if (/\s/.test(n.data[i])) continue;
      const r = document.createRange();
      r.setStart(n, i);
      r.setEnd(n, i + 1);
      const b = r.getBoundingClientRect();
      out.push({c: n.data[i], x: b.left, top: b.top, bottom: b.bottom});
    }
  }
  return out;
})()`
}
