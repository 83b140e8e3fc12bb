// Package browsertest drives a real headless Chromium from Go tests, over
// the Chrome DevTools Protocol on a websocket (golang.org/x/net/websocket,
// already in the module graph): start the browser, open a page, navigate,
// run a line of JavaScript in the page (to fill a form or click a button,
// as a person would), wait for the next page to load, and take a
// screenshot at a given screen width.
//
// The browser is the Debian package chromium (or the binary $CHROMIUM
// names). Where none is installed, Start skips the test with a message,
// except under CI=true, where a missing browser fails it: CI installs the
// package (.ci/run).
//
// It is a test helper: it starts a process, listens on loopback only (the
// DevTools port is chosen by the browser, --remote-debugging-port=0), and
// stops the browser when the test ends.
package browsertest

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/websocket"
)

// wait bounds every wait for the browser: a page that has not loaded by
// then has failed, whatever the machine's load.
const wait = 60 * time.Second

// Binary returns the browser to run, or "" when none is installed.
func Binary() string {
	if b := os.Getenv("CHROMIUM"); b != "" {
		return b
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Browser is a running headless Chromium.
type Browser struct {
	t    testing.TB
	ws   *websocket.Conn
	mu   sync.Mutex
	next int
	resp map[int]chan message
	subs []*waiter
}

type message struct {
	ID        int             `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

type waiter struct {
	method, session string
	ch              chan message
}

// Start runs a headless Chromium for the test, or skips the test (fails
// it under CI=true) when no browser is installed.
func Start(t testing.TB) *Browser {
	t.Helper()
	bin := Binary()
	if bin == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("no browser is installed (chromium); CI installs the Debian package chromium in .ci/run")
		}
		t.Skip("no browser is installed: apt-get install chromium (or set CHROMIUM) to run the browser tests")
	}
	profile, err := os.MkdirTemp("", "browsertest-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
		"--disable-sync", "--metrics-recording-only", "--mute-audio", "--hide-scrollbars",
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "--remote-allow-origins=*",
		"--user-data-dir="+profile, "about:blank")
	// Its own process group, so that stopping it stops its helpers too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	var b *Browser
	t.Cleanup(func() {
		// Ask it to close; stop what is left of its process group.
		if b != nil {
			b.call("", "Browser.close", map[string]any{}, nil)
			b.ws.Close()
		}
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		os.RemoveAll(profile)
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, url, ok := strings.Cut(sc.Text(), "DevTools listening on "); ok {
				select {
				case found <- strings.TrimSpace(url):
				default:
				}
			}
		}
	}()
	var url string
	select {
	case url = <-found:
	case <-time.After(wait):
		t.Fatalf("%s did not open its DevTools endpoint", bin)
	}
	ws, err := websocket.Dial(url, "", "http://127.0.0.1/")
	if err != nil {
		t.Fatalf("DevTools websocket: %v", err)
	}
	b = &Browser{t: t, ws: ws, resp: map[int]chan message{}}
	go b.read()
	return b
}

func (b *Browser) read() {
	for {
		var raw []byte
		if err := websocket.Message.Receive(b.ws, &raw); err != nil {
			b.mu.Lock()
			for id, ch := range b.resp {
				close(ch)
				delete(b.resp, id)
			}
			b.mu.Unlock()
			return
		}
		var m message
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.resp[m.ID]; ok {
				ch <- m
				delete(b.resp, m.ID)
			}
		} else {
			kept := b.subs[:0]
			for _, w := range b.subs {
				if w.method == m.Method && w.session == m.SessionID {
					w.ch <- m
					continue
				}
				kept = append(kept, w)
			}
			b.subs = kept
		}
		b.mu.Unlock()
	}
}

// call sends one DevTools command and returns its result.
func (b *Browser) call(session, method string, params any, out any) error {
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan message, 1)
	b.resp[id] = ch
	b.mu.Unlock()
	p, _ := json.Marshal(params)
	if err := websocket.Message.Send(b.ws, string(mustJSON(message{ID: id, Method: method, SessionID: session, Params: p}))); err != nil {
		return err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("browsertest: the browser went away during %s", method)
		}
		if m.Error != nil {
			return fmt.Errorf("browsertest: %s: %s", method, m.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-time.After(wait):
		return fmt.Errorf("browsertest: %s had no answer", method)
	}
}

// expect registers interest in the next event of method on session.
func (b *Browser) expect(session, method string) chan message {
	w := &waiter{method: method, session: session, ch: make(chan message, 1)}
	b.mu.Lock()
	b.subs = append(b.subs, w)
	b.mu.Unlock()
	return w.ch
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// Page is one browser tab.
type Page struct {
	b       *Browser
	session string
	width   int
}

// NewPage opens a tab laid out as a screen width CSS pixels wide (a
// phone is 390).
func (b *Browser) NewPage(width int) *Page {
	b.t.Helper()
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		b.t.Fatal(err)
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &att); err != nil {
		b.t.Fatal(err)
	}
	p := &Page{b: b, session: att.SessionID, width: width}
	for _, c := range []struct {
		m string
		p any
	}{
		{"Page.enable", map[string]any{}},
		{"Runtime.enable", map[string]any{}},
		{"Emulation.setDeviceMetricsOverride", map[string]any{"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": width < 600}},
	} {
		if err := b.call(p.session, c.m, c.p, nil); err != nil {
			b.t.Fatal(err)
		}
	}
	return p
}

// loaded runs act and waits for the page it leads to to finish loading.
func (p *Page) loaded(what string, act func() error) {
	p.b.t.Helper()
	ch := p.b.expect(p.session, "Page.loadEventFired")
	if err := act(); err != nil {
		p.b.t.Fatalf("%s: %v", what, err)
	}
	select {
	case <-ch:
	case <-time.After(wait):
		p.b.t.Fatalf("%s: the page did not load", what)
	}
}

// Navigate opens url and waits for it to load.
func (p *Page) Navigate(url string) {
	p.b.t.Helper()
	p.loaded("navigate to "+url, func() error {
		var res struct {
			ErrorText string `json:"errorText"`
		}
		if err := p.b.call(p.session, "Page.navigate", map[string]any{"url": url}, &res); err != nil {
			return err
		}
		if res.ErrorText != "" {
			return fmt.Errorf("%s", res.ErrorText)
		}
		return nil
	})
}

// Eval evaluates a JavaScript expression in the page and returns its value.
func (p *Page) Eval(expr string) any {
	p.b.t.Helper()
	var res struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := p.b.call(p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &res); err != nil {
		p.b.t.Fatal(err)
	}
	if res.ExceptionDetails != nil {
		p.b.t.Fatalf("%s: %s", expr, res.ExceptionDetails.Text)
	}
	return res.Result.Value
}

// Act evaluates an expression that leads to another page (a click on a
// submit button, a form's submission) and waits for that page to load.
func (p *Page) Act(expr string) {
	p.b.t.Helper()
	p.loaded(expr, func() error {
		p.Eval(expr)
		return nil
	})
}

// Text is the page's visible text.
func (p *Page) Text() string {
	p.b.t.Helper()
	s, _ := p.Eval("document.body.innerText").(string)
	return s
}

// URL is the page's address.
func (p *Page) URL() string {
	p.b.t.Helper()
	s, _ := p.Eval("location.href").(string)
	return s
}

// Screenshot saves the whole page, as laid out at the page's width, as a
// PNG at path.
func (p *Page) Screenshot(path string) {
	p.b.t.Helper()
	h, _ := p.Eval("Math.ceil(document.documentElement.scrollHeight)").(float64)
	if h < 200 {
		h = 200
	}
	if err := p.b.call(p.session, "Emulation.setDeviceMetricsOverride", map[string]any{"width": p.width, "height": int(h), "deviceScaleFactor": 1, "mobile": p.width < 600}, nil); err != nil {
		p.b.t.Fatal(err)
	}
	var shot struct {
		Data string `json:"data"`
	}
	if err := p.b.call(p.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &shot); err != nil {
		p.b.t.Fatal(err)
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		p.b.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.b.t.Fatal(err)
	}
}

// Overflows reports whether anything on the page is wider than the screen
// (a phone would have to scroll sideways to read it).
func (p *Page) Overflows() bool {
	p.b.t.Helper()
	v, _ := p.Eval("document.documentElement.scrollWidth > window.innerWidth").(bool)
	return v
}

// Zone makes the page read its clock in the IANA time zone zone and
// format dates in locale (such as en-US), as a reader there would see
// them.
func (p *Page) Zone(zone, locale string) {
	p.b.t.Helper()
	if err := p.b.call(p.session, "Emulation.setTimezoneOverride", map[string]any{"timezoneId": zone}, nil); err != nil {
		p.b.t.Fatal(err)
	}
	if err := p.b.call(p.session, "Emulation.setLocaleOverride", map[string]any{"locale": locale}, nil); err != nil {
		p.b.t.Fatal(err)
	}
}

// WaitFor waits until the JavaScript expression cond is true in the page,
// without a page load: what a script on the page does by itself.
func (p *Page) WaitFor(what, cond string) {
	p.b.t.Helper()
	deadline := time.Now().Add(wait)
	for {
		if ok, _ := p.Eval(cond).(bool); ok {
			return
		}
		if time.Now().After(deadline) {
			p.b.t.Fatalf("%s: not within %s", what, wait)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
