package devrun_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/scripts/devrun"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// call sends a request and returns the status and the decoded JSON answer.
func call(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: answer %q is not JSON", method, url, raw)
		}
	}
	return resp.StatusCode, out
}

// The control API restarts a service with extra environment; a service that
// exits with a fail point's status 137 stays down without stopping the
// suite and can be restarted; a restart that fails is told to its caller;
// any other exit still stops everything.
func TestControlAPI(t *testing.T) {
	url := databaseURL(t)
	alphaDB, betaDB := uniqueName("alpha"), uniqueName("beta")
	dropAfter(t, url, alphaDB, betaDB)
	cfg := devrun.Config{
		DatabaseURL: url,
		DataDir:     t.TempDir(),
		Dir:         fakeRepo(t, "alpha", "beta"),
		BinDir:      "bin",
		BrokerAddr:  "127.0.0.1:0",
		Services: []suite.Service{
			{Name: "alpha", Port: freePort(t), DBName: alphaDB},
			{Name: "beta", Port: freePort(t), DBName: betaDB},
		},
		ReadyTimeout: time.Minute,
		GracePeriod:  10 * time.Second,
		Environ:      append(os.Environ(), "FAKE_PID_DIR="+t.TempDir()),
		ControlAddr:  fmt.Sprintf("127.0.0.1:%d", freePort(t)),
	}
	control := "http://" + cfg.ControlAddr
	alpha, beta := cfg.Services[0].LocalURL(), cfg.Services[1].LocalURL()

	out := &buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- devrun.Run(ctx, cfg, out) }()
	poll.Until(t, 2*time.Minute, "the control API", func() bool { return strings.Contains(out.String(), "control API on "+control) })
	running := func() {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("the runner stopped: %v\n%s", err, out.String())
		default:
		}
	}

	code, list := call(t, "GET", control+"/services", "")
	if services, _ := list["services"].([]any); code != 200 || len(services) != 2 {
		t.Fatalf("GET /services: %d %v", code, list)
	}

	t.Run("restart with a fail point armed", func(t *testing.T) {
		code, v := call(t, "POST", control+"/services/alpha/restart", `{"env":{"FAILPOINTS":"relay.before-publish=exit"}}`)
		if code != 200 || v["state"] != "running" || v["run"] != 2.0 {
			t.Fatalf("restart: %d %v", code, v)
		}
		if !strings.Contains(out.String(), "alpha | failpoints=relay.before-publish=exit\n") {
			t.Errorf("the restarted service did not get FAILPOINTS:\n%s", out.String())
		}
	})

	t.Run("a fail point's exit keeps the suite running", func(t *testing.T) {
		if code, _ := call(t, "GET", alpha+"/exit?code=137", ""); code != 200 {
			t.Fatalf("asking alpha to exit: %d", code)
		}
		code, v := call(t, "GET", control+"/services/alpha/exit?timeout=20s", "")
		if code != 200 || v["state"] != "exited" || v["exitCode"] != 137.0 || v["failPoint"] != true {
			t.Fatalf("wait exit: %d %v", code, v)
		}
		poll.Until(t, 10*time.Second, "the runner's note", func() bool {
			return strings.Contains(out.String(), "alpha exited with status 137: an armed fail point")
		})
		running()
	})

	t.Run("restart brings the usual environment back", func(t *testing.T) {
		code, v := call(t, "POST", control+"/services/alpha/restart", "")
		if code != 200 || v["state"] != "running" || v["run"] != 3.0 || v["env"] != nil {
			t.Fatalf("restart: %d %v", code, v)
		}
		if n := strings.Count(out.String(), "alpha | failpoints=\n"); n != 2 {
			t.Errorf("alpha started %d times without FAILPOINTS, want 2 (first start and this one)", n)
		}
	})

	t.Run("a failed restart is told to its caller", func(t *testing.T) {
		code, v := call(t, "POST", control+"/services/alpha/restart", `{"env":{"FAILPOINTS":"crash:`+alphaDB+`"}}`)
		if code != http.StatusBadGateway || !strings.Contains(fmt.Sprint(v["error"]), "exit status 3") {
			t.Fatalf("restart into a crash: %d %v", code, v)
		}
		running()
		if code, v := call(t, "GET", control+"/services/alpha", ""); code != 200 || v["state"] != "exited" || v["exitCode"] != 3.0 {
			t.Fatalf("state after the failed restart: %d %v", code, v)
		}
		if code, v := call(t, "POST", control+"/services/alpha/restart", ""); code != 200 || v["state"] != "running" {
			t.Fatalf("restart after the failed one: %d %v", code, v)
		}
	})

	t.Run("request errors", func(t *testing.T) {
		tests := []struct {
			method, path, body string
			want               int
		}{
			{"POST", "/services/nope/restart", "", http.StatusNotFound},
			{"GET", "/services/nope", "", http.StatusNotFound},
			{"POST", "/services/alpha/restart", `{"env":{"bad-name":"x"}}`, http.StatusBadRequest},
			{"POST", "/services/alpha/restart", `{"environment":{}}`, http.StatusBadRequest},
			{"POST", "/services/alpha/restart", `{"env":{"LD_PRELOAD":"/tmp/x.so"}}`, http.StatusBadRequest},
			{"POST", "/services/alpha/restart", `{"env":{"DATABASE_URL":"postgres://elsewhere"}}`, http.StatusBadRequest},
			{"GET", "/services/beta/exit?timeout=soon", "", http.StatusBadRequest},
			{"GET", "/services/beta/exit?timeout=100ms", "", http.StatusGatewayTimeout},
		}
		for _, tt := range tests {
			if code, v := call(t, tt.method, control+tt.path, tt.body); code != tt.want || v["error"] == nil {
				t.Errorf("%s %s %s: %d %v, want %d with an error", tt.method, tt.path, tt.body, code, v, tt.want)
			}
		}
		running()
	})

	t.Run("requests from elsewhere", func(t *testing.T) {
		port := strings.TrimPrefix(cfg.ControlAddr, "127.0.0.1:")
		tests := []struct {
			name, method, path, contentType, host, origin string
			want                                          int
		}{
			{"no content type", "POST", "/services/beta/stop", "", "", "", http.StatusUnsupportedMediaType},
			{"form post", "POST", "/services/beta/stop", "application/x-www-form-urlencoded", "", "", http.StatusUnsupportedMediaType},
			{"text post", "POST", "/services/beta/restart", "text/plain", "", "", http.StatusUnsupportedMediaType},
			{"delete without content type", "DELETE", "/broker/faults", "", "", "", http.StatusUnsupportedMediaType},
			{"foreign origin", "POST", "/services/beta/stop", "application/json", "", "http://evil.example", http.StatusForbidden},
			{"foreign origin reading", "GET", "/services", "", "", "https://evil.example", http.StatusForbidden},
			{"loopback origin on another port", "POST", "/services/beta/stop", "application/json", "", "http://127.0.0.1:1", http.StatusForbidden},
			{"foreign host", "GET", "/services", "", "evil.example:" + port, "", http.StatusForbidden},
			{"rebound host", "POST", "/services/beta/stop", "application/json", "attacker.example", "", http.StatusForbidden},
			{"same origin", "GET", "/services", "", "localhost:" + port, "http://localhost:" + port, http.StatusOK},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				req, err := http.NewRequest(tt.method, control+tt.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				if tt.contentType != "" {
					req.Header.Set("Content-Type", tt.contentType)
				}
				if tt.host != "" {
					req.Host = tt.host
				}
				if tt.origin != "" {
					req.Header.Set("Origin", tt.origin)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tt.want {
					t.Fatalf("%s %s = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.want)
				}
			})
		}
		if code, v := call(t, "GET", control+"/services/beta", ""); code != 200 || v["state"] != "running" {
			t.Fatalf("beta after the refused requests: %d %v", code, v)
		}
		running()
	})

	t.Run("restart logs names, not values", func(t *testing.T) {
		code, v := call(t, "POST", control+"/services/alpha/restart", `{"env":{"LOG_LEVEL":"value-not-for-the-log"}}`)
		if code != 200 || v["state"] != "running" {
			t.Fatalf("restart: %d %v", code, v)
		}
		if strings.Contains(runnerLines(out.String()), "value-not-for-the-log") {
			t.Errorf("the runner logged a restart's value:\n%s", out.String())
		}
		if !strings.Contains(out.String(), "with LOG_LEVEL set") {
			t.Errorf("the runner did not name the restart's variable:\n%s", out.String())
		}
	})

	// Any other exit is a crash: everything stops, as without the control API.
	if code, _ := call(t, "GET", beta+"/exit?code=3", ""); code != 200 {
		t.Fatalf("asking beta to exit: %d", code)
	}
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "beta exited unexpectedly: exit status 3") {
			t.Fatalf("Run() = %v, want beta's crash", err)
		}
	case <-time.After(time.Minute):
		t.Fatalf("a crash did not stop the runner:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "alpha | graceful stop") {
		t.Errorf("alpha was not stopped gracefully:\n%s", out.String())
	}
}

// runnerLines are the runner's own lines of out (prefixed "run").
func runnerLines(out string) string {
	var b strings.Builder
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "run ") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
