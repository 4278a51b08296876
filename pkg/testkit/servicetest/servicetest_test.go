package servicetest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/shopspring/decimal"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
)

// echoService is a run function that serves /readyz and /env/{name}, which
// answers the value of an environment variable, until ctx ends.
func echoService(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("GET /env/{name}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%q", getenv(r.PathValue("name")))
	})
	srv := &http.Server{Addr: getenv("HTTP_ADDR"), Handler: mux}
	fmt.Fprintln(stdout, "echo service started")
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		if err := srv.Shutdown(context.Background()); err != nil {
			return err
		}
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

func TestStartFillsTheEnvironmentAndPublishes(t *testing.T) {
	s := servicetest.Start(t, echoService, map[string]string{"EXTRA": "x", "LOG_LEVEL": "info"})
	for name, want := range map[string]string{
		"EXTRA": "x", "LOG_LEVEL": "info", "ORDER_EVENTS_TOPIC": s.Topic, "DLQ_TOPIC": s.Topic + ".dlq",
		"RETRY_INITIAL_INTERVAL": "10ms", "RETRY_MAX_INTERVAL": "50ms",
	} {
		var got string
		s.GetJSON("/env/"+name, &got)
		if got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	var db string
	if s.GetJSON("/env/DB_NAME", &db); db == "" {
		t.Error("DB_NAME is empty")
	}

	env, err := event.New(event.OrderCreated, event.Meta{AggregateID: "O-1", AggregateVersion: 1, Producer: "test"},
		event.OrderCreatedData{CustomerID: "C-1", Currency: "CNY", Amount: event.NewMoney(decimal.NewFromInt(1)),
			Items: []event.PricedItem{{SKU: "S", Quantity: 1, UnitPrice: event.NewMoney(decimal.NewFromInt(1))}}})
	if err != nil {
		t.Fatal(err)
	}
	s.Publish(env)
	s.PublishRaw("O-2", []byte("raw"))
	var brokers string
	s.GetJSON("/env/KAFKA_BROKERS", &brokers)
	byKey := map[string]*kgo.Record{}
	for _, r := range servicetest.Consume(t, []string{brokers}, s.Topic, 2) {
		byKey[string(r.Key)] = r
	}
	if r := byKey["O-1"]; r == nil || len(r.Headers) == 0 {
		t.Errorf("the envelope's record %+v, want it keyed O-1 with the relay's headers", r)
	}
	if r := byKey["O-2"]; r == nil || string(r.Value) != "raw" || len(r.Headers) != 0 {
		t.Errorf("the raw record %+v, want it keyed O-2, as sent", r)
	}
	if code, _ := s.Do(http.MethodGet, "/nothing", ""); code != http.StatusNotFound {
		t.Errorf("GET /nothing = %d, want 404", code)
	}
	s.Stop()
	if got := s.Logs(); got != "echo service started\n" {
		t.Errorf("log %q", got)
	}
}

func TestStartBrokerLater(t *testing.T) {
	s := servicetest.StartWithoutBroker(t, echoService, nil)
	s.StartBroker()
	s.PublishRaw("K", []byte("v"))
	var brokers string
	s.GetJSON("/env/KAFKA_BROKERS", &brokers)
	if got := servicetest.Consume(t, []string{brokers}, s.Topic, 1); string(got[0].Value) != "v" {
		t.Fatalf("record %q", got[0].Value)
	}
}

// TestDrainedWaitsForTheGroupsCommits: Drained returns once the group has
// committed the end of every partition, here after a group of the test's
// own read both records and committed them.
func TestDrainedWaitsForTheGroupsCommits(t *testing.T) {
	s := servicetest.Start(t, echoService, nil)
	s.PublishRaw("K-1", []byte("1"))
	s.PublishRaw("K-2", []byte("2"))
	var brokers string
	s.GetJSON("/env/KAFKA_BROKERS", &brokers)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumerGroup("drained"), kgo.ConsumeTopics(s.Topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), servicetest.Timeout)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < 2 && ctx.Err() == nil {
		recs = append(recs, cl.PollFetches(ctx).Records()...)
	}
	if len(recs) != 2 {
		t.Fatalf("read %d records, want 2", len(recs))
	}
	if err := cl.CommitRecords(ctx, recs...); err != nil {
		t.Fatal(err)
	}
	s.Drained("drained")
}
