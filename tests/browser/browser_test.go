// Package browser_test drives the console (services/console) in a real
// browser, Debian's chromium, from Go with chromedp, against a suite the
// black-box harness starts: what a learner sees, not only what the API
// answers. Without chromium the tests skip, saying so, unless
// REQUIRE_BROWSER=1 (.ci/run, which installs it) makes that a failure.
package browser_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// chromiumPaths are where the browser is looked for, after $CHROMIUM:
// Debian's chromium first.
var chromiumPaths = []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// chromium returns the browser's path, skipping the test without one: call
// it first, before the suite starts.
func chromium(t *testing.T) string {
	t.Helper()
	candidates := chromiumPaths
	if p := os.Getenv("CHROMIUM"); p != "" {
		candidates = []string{p}
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	msg := "no chromium to drive (looked for $CHROMIUM, then " + `"/usr/bin/chromium", chromium, chromium-browser, google-chrome` +
		"): install Debian's chromium (apt-get install chromium), as .ci/run does"
	if os.Getenv("REQUIRE_BROWSER") == "1" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser is one headless chromium tab for a test, closed when it ends.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// newBrowser starts chromium with a tab of width × height that sends the
// console's admin token with every request and accepts every dialog the
// page opens (a replay's confirmation).
func newBrowser(t *testing.T, exec, token string, width, height int) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exec),
		chromedp.WindowSize(width, height),
		// Root in a container has no user namespace for the sandbox.
		chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first call starts the browser and lives as long as ctx: no
	// timeout on it.
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	if token != "" {
		if _, err := chromedp.Call(ctx, network.SetExtraHTTPHeaders,
			network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + token}}); err != nil {
			t.Fatalf("chromium: set the admin token: %v", err)
		}
	}
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			if _, err := chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true}); err != nil {
				return
			}
		}
	}()
	return &browser{t: t, ctx: ctx}
}

// do runs actions, failing the test after timeout with the page's main
// content.
func (b *browser) do(timeout time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail(what, err)
	}
}

// fail fails the test, showing the page.
func (b *browser) fail(what string, err error) {
	b.t.Helper()
	dump, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	html, _ := chromedp.Run(dump, chromedp.OuterHTML(chromedp.CSS("main")))
	if len(html) > 4000 {
		html = html[:4000]
	}
	b.t.Fatalf("%s: %v\npage:\n%s", what, err, html)
}

// get runs one action that returns a value, failing the test after
// timeout.
func get[T any](b *browser, timeout time.Duration, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		b.fail(what, err)
	}
	return v
}
