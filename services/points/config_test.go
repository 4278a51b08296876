package main

import (
	"strings"
	"testing"
	"time"
)

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		check   func(t *testing.T, c config)
		wantErr []string
	}{
		{
			name: "defaults",
			env:  map[string]string{},
			check: func(t *testing.T, c config) {
				if c.HTTPAddr != ":8084" || c.DBName != "points" || c.ConsumerGroup != "points-service" ||
					c.OrderEventsTopic != "order-events" || c.DLQTopic != "order-events.dlq" ||
					c.Retry.MaxAttempts != 5 || c.Retry.InitialInterval != time.Second || c.Retry.MaxInterval != 30*time.Second {
					t.Fatalf("defaults = %+v", c)
				}
			},
		},
		{
			name: "overrides",
			env:  map[string]string{"KAFKA_BROKERS": "a:1, b:2", "RETRY_INITIAL_INTERVAL": "10ms", "RETRY_MAX_INTERVAL": "50ms"},
			check: func(t *testing.T, c config) {
				if len(c.Brokers) != 2 || c.Brokers[1] != "b:2" || c.Retry.InitialInterval != 10*time.Millisecond {
					t.Fatalf("config = %+v", c)
				}
			},
		},
		{
			name: "every problem is reported",
			env: map[string]string{"RETRY_MAX_ATTEMPTS": "many", "HTTP_ADDR": "8083", "LOG_LEVEL": "loud",
				"FAILPOINTS": "points.apply", "DLQ_TOPIC": "order-events"},
			wantErr: []string{"RETRY_MAX_ATTEMPTS", "HTTP_ADDR", "LOG_LEVEL", "FAILPOINTS", "DLQ_TOPIC"},
		},
		{
			name:    "retry intervals out of order",
			env:     map[string]string{"RETRY_INITIAL_INTERVAL": "1m", "RETRY_MAX_INTERVAL": "1s"},
			wantErr: []string{"RETRY_"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(func(k string) string { return tt.env[k] })
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("loadConfig: %v", err)
				}
				tt.check(t, c)
				return
			}
			if err == nil {
				t.Fatal("loadConfig succeeded, want an error")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %s", err, want)
				}
			}
		})
	}
}
