package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// fakeConsumer answers the admin API of one consumer holding two dead
// letters; it checks the bearer token.
func fakeConsumer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	first := time.Date(2026, 8, 10, 2, 0, 0, 0, time.UTC)
	records := []suiteapi.DeadLetter{
		{ID: 2, Consumer: "inventory-service", EventID: "E-2", AggregateID: "O-2", EventType: "OrderPaid", OriginalTopic: "order-events",
			Key: []byte("O-2"), Value: []byte(`{"eventId":"E-2"}`), Headers: map[string]string{"eventId": "E-2"},
			FailureReason: "HANDLER_ERROR: failpoint inventory.apply: injected failure", ErrorClass: "RETRYABLE", Attempts: 5,
			FirstFailedAt: first, DeadLetteredAt: first.Add(15 * time.Second), Status: "DEAD"},
		{ID: 1, Consumer: "inventory-service", EventID: "E-1", AggregateID: "O-1", OriginalTopic: "order-events",
			Key: []byte("O-1"), Value: []byte(`not json`), FailureReason: "INVALID_JSON: unexpected end", ErrorClass: "PERMANENT", Attempts: 1,
			FirstFailedAt: first, DeadLetteredAt: first, Status: "REPLAYED"},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /admin/dlq", func(w http.ResponseWriter, r *http.Request) {
		var items []suiteapi.DeadLetter
		for _, d := range records {
			agg, status := r.URL.Query().Get("aggregateId"), r.URL.Query().Get("status")
			if (agg == "" || agg == d.AggregateID) && (status == "" || status == d.Status) {
				items = append(items, d)
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"count": len(items), "items": items})
	})
	mux.HandleFunc("GET /admin/dlq/{id}", func(w http.ResponseWriter, r *http.Request) {
		for _, d := range records {
			if strconv.FormatInt(d.ID, 10) == r.PathValue("id") {
				_ = json.NewEncoder(w).Encode(d)
				return
			}
		}
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"businessCode":"NOT_FOUND","message":"dead letter ` + r.PathValue("id") + ` not found"}`))
	})
	mux.HandleFunc("POST /admin/dlq/{id}/replay", func(w http.ResponseWriter, r *http.Request) {
		outcome := map[string]string{"1": "ALREADY_REPLAYED", "2": "APPLIED", "3": "IGNORED_STALE", "4": "PENDING", "5": "SHRUG"}[r.PathValue("id")]
		if outcome == "" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"businessCode":"NOT_FOUND","message":"dead letter 9 not found"}`))
			return
		}
		if r.Header.Get("X-Operator") != "alice" {
			t.Errorf("replay requested by %q, want alice", r.Header.Get("X-Operator"))
		}
		id, _ := strconv.Atoi(r.PathValue("id"))
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "eventId": "E-" + r.PathValue("id"), "originalTopic": "order-events", "outcome": outcome})
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"businessCode":"UNAUTHORIZED","message":"admin token required"}`))
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestCommands(t *testing.T) {
	srv := fakeConsumer(t, "secret")
	withToken := map[string]string{"ADMIN_TOKEN": "secret"}
	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want []string
	}{
		{"list", []string{"list", "--service", "inventory", "--url", srv.URL}, withToken, cli.ExitOK, []string{
			"SERVICE    ID  STATUS    CLASS      ATTEMPTS  TYPE       AGGREGATE  EVENT ID  FIRST FAILED          REASON",
			"inventory  2   DEAD      RETRYABLE  5         OrderPaid  O-2        E-2       2026-08-10T02:00:00Z  HANDLER_ERROR: failpoint inventory.apply: injected failure",
			"inventory  1   REPLAYED  PERMANENT  1         -          O-1        E-1",
			"2 dead letters",
		}},
		{"list of one order", []string{"list", "--service", "inventory", "--url", srv.URL, "--aggregate", "O-1"}, withToken, cli.ExitOK, []string{
			"inventory  1   REPLAYED", "1 dead letters of O-1",
		}},
		{"list of those waiting", []string{"list", "--service", "inventory", "--url", srv.URL, "--status", "DEAD"}, withToken, cli.ExitOK, []string{
			"inventory  2   DEAD", "1 dead letters DEAD",
		}},
		{"show", []string{"show", "--service", "inventory", "--url", srv.URL, "--id", "2"}, withToken, cli.ExitOK, []string{
			"errorClass      RETRYABLE", "attempts        5", "firstFailedAt   2026-08-10T02:00:00Z",
			"originalTopic   order-events (partition 0, offset 0)", "header eventId  E-2", `"eventId": "E-2"`,
		}},
		{"show a poison message", []string{"show", "--service", "inventory", "--url", srv.URL, "--id", "1"}, withToken, cli.ExitOK, []string{
			`"not json"`,
		}},
		{"replay", []string{"replay", "--service", "inventory", "--url", srv.URL, "--id", "2", "--by", "alice"}, withToken, cli.ExitOK, []string{
			"dead letter 2 of inventory: APPLIED: E-2 sent back to order-events with its original eventId; the consumer applied it (audited as alice)",
		}},
		{"replay of a stale event", []string{"replay", "--service", "inventory", "--url", srv.URL, "--id", "3", "--by", "alice"}, withToken, cli.ExitOK, []string{
			"dead letter 3 of inventory: IGNORED_STALE: E-3 sent back to order-events with its original eventId; the consumer ignored it as older than the order's state, nothing changed",
		}},
		{"replay not decided yet", []string{"replay", "--service", "inventory", "--url", srv.URL, "--id", "4", "--by", "alice"}, withToken, cli.ExitOK, []string{
			"dead letter 4 of inventory: PENDING: E-4 sent back to order-events with its original eventId; the consumer had not decided yet",
		}},
		{"replay again", []string{"replay", "--service", "inventory", "--url", srv.URL, "--id", "1", "--by", "alice"}, withToken, cli.ExitOK, []string{
			"ALREADY_REPLAYED: nothing sent again",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli.Exit("dlq", usage, run(context.Background(), tt.args, env(tt.env), &stdout, &stderr), &stderr)
			if code != tt.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tt.code, stderr.String())
			}
			for _, want := range tt.want {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("output lacks %q:\n%s", want, stdout.String())
				}
			}
		})
	}
}

func TestErrors(t *testing.T) {
	srv := fakeConsumer(t, "secret")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		code int
		want string
	}{
		{"no command", nil, nil, cli.ExitUsage, "name a command"},
		{"unknown command", []string{"purge"}, nil, cli.ExitUsage, `unknown command "purge"`},
		{"unknown service", []string{"list", "--service", "order"}, nil, cli.ExitUsage, `--service "order"`},
		{"show without service", []string{"show", "--id", "1"}, nil, cli.ExitUsage, "show needs --service"},
		{"replay without id", []string{"replay", "--service", "inventory"}, nil, cli.ExitUsage, "replay needs --id N"},
		{"list with id", []string{"list", "--id", "3"}, nil, cli.ExitUsage, "list takes no --id"},
		{"bad status", []string{"list", "--status", "dead"}, nil, cli.ExitUsage, `--status "dead"`},
		{"replay with status", []string{"replay", "--service", "inventory", "--id", "1", "--status", "DEAD"}, nil, cli.ExitUsage, "takes --id, not --aggregate or --status"},
		{"url without service", []string{"list", "--url", srv.URL}, nil, cli.ExitUsage, "--url needs --service"},
		{"bad url", []string{"list", "--service", "points", "--url", "localhost"}, nil, cli.ExitUsage, "--url"},
		{"stray argument", []string{"list", "inventory"}, nil, cli.ExitUsage, `unexpected argument "inventory"`},
		{"no token", []string{"list", "--service", "inventory", "--url", srv.URL}, nil, cli.ExitFailed, "401 UNAUTHORIZED: admin token required (set ADMIN_TOKEN"},
		{"unknown id", []string{"replay", "--service", "inventory", "--url", srv.URL, "--id", "9"}, map[string]string{"ADMIN_TOKEN": "secret"}, cli.ExitFailed, "404 NOT_FOUND: dead letter 9 not found"},
		{"show unknown id", []string{"show", "--service", "inventory", "--url", srv.URL, "--id", "9"}, map[string]string{"ADMIN_TOKEN": "secret"}, cli.ExitFailed, "404 NOT_FOUND: dead letter 9 not found"},
		{"suite down", []string{"list", "--service", "inventory", "--url", "http://127.0.0.1:1"}, nil, cli.ExitFailed, "is the suite running?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := cli.Exit("dlq", usage, run(context.Background(), tt.args, env(tt.env), &stdout, &stderr), &stderr)
			if code != tt.code || !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", code, stderr.String(), tt.code, tt.want)
			}
		})
	}
}
