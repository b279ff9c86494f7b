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

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("headless", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// The first call starts the browser and must not carry a deadline (it would stop the
	// browser); each step after it is bounded, so a browser that hangs fails the test.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	defer cancel()
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}

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
