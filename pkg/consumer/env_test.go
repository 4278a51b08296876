package consumer_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/consumer"
	"github.com/reliable-orders/fulfillment/pkg/envconfig"
)

func TestReadConsumerEnv(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		check   func(t *testing.T, e consumer.Env)
		wantErr []string
	}{
		{
			name: "defaults",
			env:  map[string]string{},
			check: func(t *testing.T, e consumer.Env) {
				if len(e.Brokers) != 1 || e.Brokers[0] != "127.0.0.1:9092" || e.ConsumerGroup != "test-service" ||
					e.OrderEventsTopic != "order-events" || e.DLQTopic != "order-events.dlq" ||
					e.Retry.MaxAttempts != 5 || e.Retry.InitialInterval != time.Second || e.Retry.MaxInterval != 30*time.Second {
					t.Fatalf("defaults = %+v", e)
				}
				want := consumer.Config{Consumer: "test-service", Topic: "order-events", DLQTopic: "order-events.dlq", Retry: e.Retry}
				if got := e.Config(); got != want {
					t.Fatalf("Config = %+v, want %+v", got, want)
				}
				if e.Parking != (consumer.ParkingConfig{Deadline: 5 * time.Minute, SweepInterval: 10 * time.Second}) {
					t.Fatalf("parking defaults = %+v, want PARK_DEADLINE 5m and PARK_SWEEP_INTERVAL 10s", e.Parking)
				}
				if e.BatchSize != 256 || e.BatchLinger != 2*time.Millisecond || e.BatchWorkers != 2 || e.DBMaxConns != 8 {
					t.Fatalf("batch defaults = %d, %s, %d, %d; want CONSUMER_BATCH_SIZE 256, CONSUMER_BATCH_LINGER 2ms, CONSUMER_BATCH_WORKERS 2, DB_MAX_CONNS 8",
						e.BatchSize, e.BatchLinger, e.BatchWorkers, e.DBMaxConns)
				}
				if rt := e.Runtime(consumer.Deps{}); rt.Group != "test-service" || rt.Config != want ||
					len(rt.Brokers) != 1 || rt.Brokers[0] != e.Brokers[0] || rt.Parking != e.Parking {
					t.Fatalf("Runtime = %+v", rt)
				}
			},
		},
		{
			name: "overrides",
			env: map[string]string{"KAFKA_BROKERS": "a:1, b:2", "ORDER_EVENTS_TOPIC": "ev", "DLQ_TOPIC": "ev.dlq",
				"CONSUMER_GROUP": "g", "RETRY_MAX_ATTEMPTS": "3", "RETRY_INITIAL_INTERVAL": "10ms", "RETRY_MAX_INTERVAL": "50ms",
				"PARK_DEADLINE": "1s", "PARK_SWEEP_INTERVAL": "100ms", "CONSUMER_BATCH_SIZE": "1", "CONSUMER_BATCH_LINGER": "0s"},
			check: func(t *testing.T, e consumer.Env) {
				if len(e.Brokers) != 2 || e.Brokers[1] != "b:2" || e.OrderEventsTopic != "ev" || e.DLQTopic != "ev.dlq" ||
					e.ConsumerGroup != "g" || e.Retry.MaxAttempts != 3 ||
					e.Retry.InitialInterval != 10*time.Millisecond || e.Retry.MaxInterval != 50*time.Millisecond ||
					e.Parking.Deadline != time.Second || e.Parking.SweepInterval != 100*time.Millisecond ||
					e.BatchSize != 1 || e.BatchLinger != 0 {
					t.Fatalf("env = %+v", e)
				}
			},
		},
		{
			name:    "every problem is reported",
			env:     map[string]string{"RETRY_MAX_ATTEMPTS": "many", "RETRY_MAX_INTERVAL": "soon", "DLQ_TOPIC": "order-events"},
			wantErr: []string{"RETRY_MAX_ATTEMPTS", "RETRY_MAX_INTERVAL", "DLQ_TOPIC"},
		},
		{
			name:    "no broker",
			env:     map[string]string{"KAFKA_BROKERS": " , "},
			wantErr: []string{"KAFKA_BROKERS"},
		},
		{
			name:    "retry intervals out of order",
			env:     map[string]string{"RETRY_INITIAL_INTERVAL": "1m", "RETRY_MAX_INTERVAL": "1s"},
			wantErr: []string{"RETRY_*"},
		},
		{
			name:    "malformed parking durations",
			env:     map[string]string{"PARK_DEADLINE": "soon", "PARK_SWEEP_INTERVAL": "often"},
			wantErr: []string{"PARK_DEADLINE", "PARK_SWEEP_INTERVAL"},
		},
		{
			name:    "batch settings out of range",
			env:     map[string]string{"CONSUMER_BATCH_SIZE": "0", "CONSUMER_BATCH_LINGER": "2s", "DB_MAX_CONNS": "1"},
			wantErr: []string{"CONSUMER_BATCH_SIZE", "CONSUMER_BATCH_LINGER", "DB_MAX_CONNS"},
		},
		{
			name:    "no batch worker",
			env:     map[string]string{"CONSUMER_BATCH_WORKERS": "0"},
			wantErr: []string{"CONSUMER_BATCH_WORKERS"},
		},
		{
			name:    "more batch workers than connections",
			env:     map[string]string{"CONSUMER_BATCH_WORKERS": "8", "DB_MAX_CONNS": "8"},
			wantErr: []string{"DB_MAX_CONNS=8: want at least 9"},
		},
		{
			name:    "a parking deadline of zero",
			env:     map[string]string{"PARK_DEADLINE": "0s"},
			wantErr: []string{"PARK_DEADLINE"},
		},
		{
			name:    "no attempt",
			env:     map[string]string{"RETRY_MAX_ATTEMPTS": "0"},
			wantErr: []string{"RETRY_*"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := envconfig.New(func(k string) string { return tt.env[k] })
			e := consumer.ReadEnv(r, "test-service")
			err := errors.Join(r.Err(), e.Validate())
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("ReadEnv: %v", err)
				}
				tt.check(t, e)
				return
			}
			if err == nil {
				t.Fatal("no error, want one")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %s", err, want)
				}
			}
		})
	}
}
