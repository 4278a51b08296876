package devrun_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/scripts/devrun"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// startRunner runs the runner with one fake service, alpha, until the test
// ends, and returns the control API's URL, alpha's URL and the output.
func startRunner(t *testing.T, kafkaBrokers string) (control, alpha string, out *buffer, done <-chan error) {
	t.Helper()
	url := databaseURL(t)
	alphaDB := uniqueName("alpha")
	dropAfter(t, url, alphaDB)
	cfg := devrun.Config{
		DatabaseURL:  url,
		KafkaBrokers: kafkaBrokers,
		DataDir:      t.TempDir(),
		Dir:          fakeRepo(t, "alpha"),
		BinDir:       "bin",
		BrokerAddr:   "127.0.0.1:0",
		Services:     []suite.Service{{Name: "alpha", Port: freePort(t), DBName: alphaDB}},
		ReadyTimeout: time.Minute,
		GracePeriod:  10 * time.Second,
		Environ:      append(os.Environ(), "FAKE_PID_DIR="+t.TempDir()),
		ControlAddr:  fmt.Sprintf("127.0.0.1:%d", freePort(t)),
	}
	control = "http://" + cfg.ControlAddr
	out = &buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan error, 1)
	go func() { ended <- devrun.Run(ctx, cfg, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-ended; err != nil {
			t.Errorf("Run() = %v after cancel, want nil", err)
		}
	})
	poll.Until(t, 2*time.Minute, "the control API", func() bool { return strings.Contains(out.String(), "control API on "+control) })
	return control, cfg.Services[0].LocalURL(), out, ended
}

// produce writes one record to the order events topic and reports the
// producer's error.
func produce(t *testing.T, addr string, timeout time.Duration) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordDeliveryTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: suite.OrderEventsTopic, Key: []byte("O-1"), Value: []byte(`{}`)}).FirstErr()
}

// The control API stops the embedded broker and starts it again on the same
// address, arms a lost acknowledgement on Produce requests, and stops a
// service without stopping the suite.
func TestControlAPIBrokerAndStop(t *testing.T) {
	control, alpha, out, done := startRunner(t, "")
	running := func() {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("the runner stopped: %v\n%s", err, out.String())
		default:
		}
	}
	code, v := call(t, "GET", control+"/broker", "")
	addr, _ := v["addr"].(string)
	if code != 200 || v["embedded"] != true || v["state"] != "running" || addr == "" {
		t.Fatalf("GET /broker: %d %v", code, v)
	}

	t.Run("a lost acknowledgement", func(t *testing.T) {
		code, v := call(t, "POST", control+"/broker/faults", `{"type":"lost-ack","count":2}`)
		fault, _ := v["fault"].(map[string]any)
		if code != 200 || fault["count"] != 2.0 || fault["topic"] != suite.OrderEventsTopic || fault["hits"] != 0.0 {
			t.Fatalf("arm: %d %v", code, v)
		}
		// The producer retries a timed-out request: two tries are answered
		// with the fault (after the append), the third succeeds.
		if err := produce(t, addr, 20*time.Second); err != nil {
			t.Fatalf("produce through two lost acks: %v", err)
		}
		code, v = call(t, "GET", control+"/broker", "")
		if fault, _ := v["fault"].(map[string]any); code != 200 || fault["hits"] != 2.0 {
			t.Errorf("after the produce: %d %v, want 2 hits", code, v)
		}
		if code, v := call(t, "DELETE", control+"/broker/faults", ""); code != 200 {
			t.Errorf("clear: %d %v", code, v)
		}
		if code, v := call(t, "GET", control+"/broker", ""); code != 200 || v["fault"] != nil {
			t.Errorf("after the clear: %d %v, want no fault", code, v)
		}
	})

	t.Run("an outage", func(t *testing.T) {
		code, v := call(t, "POST", control+"/broker/stop", "")
		if code != 200 || v["state"] != "stopped" || v["stops"] != 1.0 {
			t.Fatalf("stop: %d %v", code, v)
		}
		if err := produce(t, addr, 2*time.Second); err == nil {
			t.Error("a produce succeeded while the broker was stopped")
		}
		if code, v := call(t, "POST", control+"/broker/faults", `{"count":1}`); code != http.StatusConflict || v["error"] == nil {
			t.Errorf("a fault on a stopped broker: %d %v, want 409", code, v)
		}
		if code, v := call(t, "POST", control+"/broker/stop", ""); code != 200 || v["stops"] != 1.0 {
			t.Errorf("a second stop: %d %v, want 200 and no new stop", code, v)
		}
		code, v = call(t, "POST", control+"/broker/start", "")
		if code != 200 || v["state"] != "running" || v["addr"] != addr {
			t.Fatalf("start: %d %v, want running on %s", code, v, addr)
		}
		if err := produce(t, addr, 20*time.Second); err != nil {
			t.Errorf("produce after the restart: %v", err)
		}
		running()
	})

	t.Run("stop a service", func(t *testing.T) {
		code, v := call(t, "POST", control+"/services/alpha/stop", "")
		if code != 200 || v["state"] != "stopped" {
			t.Fatalf("stop: %d %v", code, v)
		}
		if !strings.Contains(out.String(), "alpha | graceful stop") {
			t.Errorf("alpha was not stopped gracefully:\n%s", out.String())
		}
		if resp, err := http.Get(alpha + "/readyz"); err == nil {
			resp.Body.Close()
			t.Error("alpha still answers after the stop")
		}
		if code, v := call(t, "GET", control+"/services/alpha/exit?timeout=5s", ""); code != 200 || v["state"] != "stopped" {
			t.Errorf("wait for the exit of a stopped service: %d %v", code, v)
		}
		running()
		if code, v := call(t, "POST", control+"/services/alpha/restart", ""); code != 200 || v["state"] != "running" || v["run"] != 2.0 {
			t.Fatalf("restart after the stop: %d %v", code, v)
		}
	})

	t.Run("request errors", func(t *testing.T) {
		tests := []struct {
			method, path, body string
			want               int
		}{
			{"POST", "/services/nope/stop", "", http.StatusNotFound},
			{"POST", "/broker/faults", `{"type":"slow"}`, http.StatusBadRequest},
			{"POST", "/broker/faults", `{"count":-1}`, http.StatusBadRequest},
			{"POST", "/broker/faults", `{"counts":1}`, http.StatusBadRequest},
		}
		for _, tt := range tests {
			if code, v := call(t, tt.method, control+tt.path, tt.body); code != tt.want || v["error"] == nil {
				t.Errorf("%s %s %s: %d %v, want %d with an error", tt.method, tt.path, tt.body, code, v, tt.want)
			}
		}
	})
	running()
}

// With KAFKA_BROKERS the runner owns no broker: the broker routes say so
// with 409.
func TestControlAPIExternalBroker(t *testing.T) {
	control, _, _, _ := startRunner(t, "127.0.0.1:1")
	if code, v := call(t, "GET", control+"/broker", ""); code != 200 || v["embedded"] != false {
		t.Errorf("GET /broker: %d %v", code, v)
	}
	for _, path := range []string{"/broker/stop", "/broker/start", "/broker/faults"} {
		code, v := call(t, "POST", control+path, "")
		if code != http.StatusConflict || !strings.Contains(fmt.Sprint(v["error"]), "KAFKA_BROKERS") {
			t.Errorf("POST %s: %d %v, want 409 naming KAFKA_BROKERS", path, code, v)
		}
	}
}
