// Package browsertest runs a headless Chromium for tests of the pages
// onetick serves, so a test reads a page as a person's browser shows it:
// after layout, styles and scripts, under the page's Content Security
// Policy.
//
// The browser is Debian's chromium, found on PATH (`make test` installs it
// through scripts/install-deps.sh). It runs with a fresh profile and
// without any of Chromium's own network traffic (updates, sync, field
// trials), which on a machine without Internet access would only fail.
package browsertest

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Browser is one Chromium process.
type Browser struct {
	ctx context.Context // the browser's first tab
}

// Start starts a headless Chromium with a fresh profile; it is stopped at
// the end of the test. A missing chromium fails the test, with how to
// install it.
func Start(tb testing.TB) *Browser {
	tb.Helper()
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		tb.Fatal("browsertest: chromium not found on PATH (run `make test`, which installs it, or `apt-get install chromium`)")
	}
	// Registered before the browser's own cleanup, so removed after the
	// browser has exited.
	profile := tb.TempDir()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(profile),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("metrics-recording-only", true),
		// /dev/shm is small in containers; Chromium crashes when it fills.
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-color-profile", "srgb"),
		// Keep timers running in background tabs: a test may watch a page
		// that refreshes itself.
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithLogf(tb.Logf))
	tb.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the browser and waits for it
		cancelCtx()
		cancelAlloc()
	})
	// The first action starts the browser, which then lives as long as the
	// context it was given: ctx, not one bounded by a timeout.
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("browsertest: starting %s: %v", bin, err)
	}
	return &Browser{ctx: ctx}
}

// Tab returns the context of a new tab, for chromedp actions, bounded by
// timeout; the tab is closed at the end of the test.
func (b *Browser) Tab(tb testing.TB, timeout time.Duration) context.Context {
	tb.Helper()
	tctx, cancelTab := chromedp.NewContext(b.ctx)
	ctx, cancel := context.WithTimeout(tctx, timeout)
	tb.Cleanup(func() {
		cancel()
		_ = chromedp.Cancel(tctx)
		cancelTab()
	})
	return ctx
}

// Viewport is the size a page is laid out for.
type Viewport struct {
	Width, Height int64
	// Scale is the device pixel ratio (default 1).
	Scale float64
	// Mobile lays the page out as a phone does (viewport meta tag, touch).
	Mobile bool
}

// Desktop and Phone are the viewports of the screenshots in docs/ (Phone
// is the CSS size of a common phone, at its pixel ratio).
var (
	Desktop = Viewport{Width: 1280, Height: 800, Scale: 1}
	Phone   = Viewport{Width: 390, Height: 844, Scale: 2, Mobile: true}
)

// Emulate lays the tab out for v.
func Emulate(v Viewport) chromedp.Action[chromedp.Void] {
	scale := v.Scale
	if scale <= 0 {
		scale = 1
	}
	opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(scale)}
	if v.Mobile {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait)
	}
	return chromedp.EmulateViewport(v.Width, v.Height, opts...)
}

// Screenshot lays the current page out for v and returns a PNG of all of
// it (beyond the viewport's height).
func Screenshot(ctx context.Context, v Viewport) ([]byte, error) {
	if err := chromedp.Do(ctx, Emulate(v)); err != nil {
		return nil, err
	}
	return chromedp.Run(ctx, chromedp.FullScreenshot(100))
}
