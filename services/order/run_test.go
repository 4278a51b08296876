package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/pkg/testkit/postgrestest"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
)

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// devEnv is m in development mode (SUITE_MODE=development).
func devEnv(m map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := m[k]; ok || k != "SUITE_MODE" {
			return v
		}
		return "development"
	}
}

func TestLoadConfigDefaults(t *testing.T) {
	cfg, err := loadConfig(devEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPAddr != "127.0.0.1:8081" || cfg.DBName != "orders" || cfg.Events.OrderEventsTopic != "order-events" ||
		cfg.Events.Brokers[0] != "127.0.0.1:9092" || cfg.Callbacks.Secret != "dev-callback-secret" ||
		cfg.Callbacks.ReplayWindow != 5*time.Minute || len(cfg.Callbacks.Previous) != 0 ||
		cfg.Peers.Payment != "http://127.0.0.1:8082" || cfg.Peers.Notification != "http://127.0.0.1:8085" ||
		cfg.Relay.BatchSize != 2000 || cfg.Relay.PollInterval != 100*time.Millisecond ||
		cfg.Relay.BackoffInitial != time.Second || cfg.Relay.BackoffMax != 30*time.Second ||
		cfg.DatabaseURL != postgres.DefaultServerURL || cfg.AdminToken != "" || cfg.LogLevel != "info" {
		t.Fatalf("defaults %+v", cfg)
	}
}

func TestLoadConfigRejects(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"bad batch size", map[string]string{"OUTBOX_BATCH_SIZE": "many"}, []string{"OUTBOX_BATCH_SIZE"}},
		{"zero batch size", map[string]string{"OUTBOX_BATCH_SIZE": "0"}, []string{"OUTBOX_BATCH_SIZE"}},
		{"bad duration", map[string]string{"OUTBOX_POLL_INTERVAL": "fast"}, []string{"OUTBOX_POLL_INTERVAL"}},
		{"backoff max below initial", map[string]string{"OUTBOX_BACKOFF_INITIAL": "10s", "OUTBOX_BACKOFF_MAX": "1s"}, []string{"OUTBOX_BACKOFF_MAX"}},
		{"bad peer url", map[string]string{"PAYMENT_URL": "localhost:8082"}, []string{"PAYMENT_URL"}},
		{"bad database url", map[string]string{"DATABASE_URL": "mysql://x"}, []string{"DATABASE_URL"}},
		{"bad log level", map[string]string{"LOG_LEVEL": "loud"}, []string{"LOG_LEVEL"}},
		{"bad fail point", map[string]string{"FAILPOINTS": "order.after-commit=explode"}, []string{"FAILPOINTS"}},
		{"every problem at once", map[string]string{"OUTBOX_BATCH_SIZE": "x", "INVENTORY_URL": "nope", "LOG_LEVEL": "loud"},
			[]string{"OUTBOX_BATCH_SIZE", "INVENTORY_URL", "LOG_LEVEL"}},
		{"bad replay window", map[string]string{"CALLBACK_REPLAY_WINDOW": "forever"}, []string{"CALLBACK_REPLAY_WINDOW"}},
		{"production without secrets", map[string]string{"SUITE_MODE": "production"}, []string{"ADMIN_TOKEN", "CALLBACK_SECRET"}},
		{"production with published secrets", map[string]string{"SUITE_MODE": "production", "ADMIN_TOKEN": "dev-admin-token",
			"CALLBACK_SECRET": "dev-callback-secret"}, []string{"ADMIN_TOKEN", "CALLBACK_SECRET"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(devEnv(tt.env))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %s", err, w)
				}
			}
		})
	}
}

// TestFailPointsDeclared: FAILPOINTS arms the order service's own points
// and its relay's; any other name, another service's or a misspelt one,
// is refused with the known ones listed.
func TestFailPointsDeclared(t *testing.T) {
	const known = "known: order.after-commit, order.before-commit, relay.after-publish, relay.before-publish"
	tests := []struct {
		spec string
		ok   bool
	}{
		{"order.before-commit=error*1", true},
		{"order.after-commit=error", true},
		{"relay.before-publish=exit,relay.after-publish=error*2", true},
		{"order.befor-commit=error", false},
		{"inventory.apply=error", false},
		{"consumer.after-commit=exit", false},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			_, err := loadConfig(devEnv(map[string]string{"FAILPOINTS": tt.spec, "FAILPOINTS_ENABLED": "true"}))
			if tt.ok {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "FAILPOINTS") || !strings.Contains(err.Error(), "unknown fail point") ||
				!strings.Contains(err.Error(), known) {
				t.Fatalf("loadConfig = %v, want FAILPOINTS refused with the %s", err, known)
			}
		})
	}
}

// TestRunRefusesToStartWithoutSecrets runs the service as a deployment
// would, with only the database and the brokers set: it must refuse to
// start, naming both missing secrets.
func TestRunRefusesToStartWithoutSecrets(t *testing.T) {
	env := map[string]string{"DATABASE_URL": postgres.DefaultServerURL, "KAFKA_BROKERS": "127.0.0.1:1"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := run(ctx, envMap(env), io.Discard)
	if err == nil {
		t.Fatal("run started without ADMIN_TOKEN and CALLBACK_SECRET")
	}
	for _, v := range []string{"ADMIN_TOKEN", "CALLBACK_SECRET"} {
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error %q does not name %s", err, v)
		}
	}
}

// TestRunWithoutBroker starts the service while no broker answers: it must
// serve HTTP and keep the event PENDING, deliver it once a broker appears,
// and stop cleanly when its context ends.
func TestRunWithoutBroker(t *testing.T) {
	server := postgrestest.ServerURL(t)
	dbName := postgrestest.UniqueName("t_order_run")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := postgres.DropDatabase(ctx, server, dbName); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	httpAddr, brokerAddr := servicetest.FreeAddr(t), servicetest.FreeAddr(t)
	env := map[string]string{
		"DATABASE_URL":           server,
		"DB_NAME":                dbName,
		"HTTP_ADDR":              httpAddr,
		"KAFKA_BROKERS":          brokerAddr,
		"ADMIN_TOKEN":            "tok",
		"SUITE_MODE":             "development",
		"OUTBOX_POLL_INTERVAL":   "20ms",
		"OUTBOX_BACKOFF_INITIAL": "50ms",
		"OUTBOX_BACKOFF_MAX":     "200ms",
		"LOG_LEVEL":              "error",
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var g errgroup.Group
	g.Go(func() error { return run(ctx, envMap(env), io.Discard) })

	base := "http://" + httpAddr
	get := func(path string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	poll.Until(t, 30*time.Second, "the service to be ready", func() bool {
		code, _ := get("/readyz")
		return code == http.StatusOK
	})
	resp, err := http.Post(base+"/orders", "application/json",
		bytes.NewReader([]byte(`{"orderId":"O-1","customerId":"C-1","currency":"CNY","items":[{"sku":"SKU-1","quantity":2,"unitPrice":"40.00"}]}`)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create with the broker down: %d", resp.StatusCode)
	}
	backlog := func() (pending int) {
		code, body := get("/admin/outbox")
		var b struct {
			Pending int `json:"pending"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &b) != nil {
			t.Fatalf("backlog: %d %s", code, body)
		}
		return b.Pending
	}
	poll.Until(t, 10*time.Second, "a failed publish attempt", func() bool {
		_, body := get("/orders/O-1/events")
		return strings.Contains(body, `"attempts":1`) || strings.Contains(body, `"attempts":2`)
	})
	if n := backlog(); n != 1 {
		t.Fatalf("pending %d with the broker down, want 1", n)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, "outbox_pending_events 1") {
		t.Fatalf("metrics %d: no outbox_pending_events 1", code)
	}

	b, err := broker.Start(broker.Config{Addr: brokerAddr, Partitions: 4, Topics: []string{"order-events"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	poll.Until(t, 30*time.Second, "delivery once the broker is up", func() bool { return backlog() == 0 })

	// The reconciliation endpoints are wired: the view, and a republish
	// the relay delivers again.
	post := func(path, body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("X-Operator", "ops")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	code, view := post("/admin/reconciliation/orders", `{"orderIds":["O-1"]}`)
	var views struct {
		Orders []struct {
			Found  bool `json:"found"`
			Events []struct {
				EventID string `json:"eventId"`
				Status  string `json:"status"`
			} `json:"events"`
		} `json:"orders"`
	}
	if code != http.StatusOK || json.Unmarshal([]byte(view), &views) != nil || len(views.Orders) != 1 || !views.Orders[0].Found ||
		len(views.Orders[0].Events) != 1 || views.Orders[0].Events[0].Status != "SENT" {
		t.Fatalf("reconciliation view: %d %s", code, view)
	}
	eventID := views.Orders[0].Events[0].EventID
	if code, body := post("/admin/outbox/"+eventID+"/republish", ""); code != http.StatusOK || !strings.Contains(body, `"status":"PENDING"`) {
		t.Fatalf("republish: %d %s", code, body)
	}
	poll.Until(t, 30*time.Second, "the republished event sent again", func() bool {
		_, body := get("/admin/outbox/" + eventID)
		return strings.Contains(body, `"status":"SENT"`)
	})

	stop()
	if err := g.Wait(); err != nil {
		t.Fatalf("run returned %v after its context ended", err)
	}
}

// TestOpenAPIDocument: the service serves the committed openapi.json, and
// started, so every route it registers is in it and vice versa.
func TestOpenAPIDocument(t *testing.T) {
	servicetest.StartWithoutBroker(t, run, map[string]string{"ADMIN_TOKEN": "tok"}).CheckOpenAPI("openapi.json")
}
