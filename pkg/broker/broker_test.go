package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/pkg/broker"
)

func TestBrokerPersistsRecordsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := broker.Config{Addr: "127.0.0.1:0", DataDir: dir, Partitions: 3, Topics: []string{"t"}}

	b, err := broker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addrs()...))
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Key: []byte("O-1"), Value: []byte("v1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	b.Close()

	b2, err := broker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	cl2, err := kgo.NewClient(kgo.SeedBrokers(b2.Addrs()...), kgo.ConsumeTopics("t"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	fetches := cl2.PollFetches(ctx)
	if err := fetches.Err(); err != nil {
		t.Fatal(err)
	}
	recs := fetches.Records()
	if len(recs) != 1 || string(recs[0].Value) != "v1" || string(recs[0].Key) != "O-1" {
		t.Fatalf("after restart got %d records, want the one produced before", len(recs))
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  broker.Config
		ok   bool
	}{
		{"default", broker.DefaultConfig(), true},
		{"bad address", broker.Config{Addr: "nope", Partitions: 1}, false},
		{"no partitions", broker.Config{Addr: "127.0.0.1:0"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
