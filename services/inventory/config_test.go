package main

import (
	"strings"
	"testing"
)

// The consumer settings (KAFKA_BROKERS, topics, CONSUMER_GROUP, RETRY_*)
// are read and tested in pkg/messaging; these tests cover what is
// inventory's own.

func TestLoadConfigDefaults(t *testing.T) {
	c, err := loadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	if c.HTTPAddr != ":8083" || c.DBName != "inventory" || c.Consumer.ConsumerGroup != "inventory-service" ||
		c.LogLevel != "info" || c.AdminToken != "" || c.FailPoints != "" {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestLoadConfigReportsEveryProblem(t *testing.T) {
	env := map[string]string{"HTTP_ADDR": "8083", "LOG_LEVEL": "loud", "FAILPOINTS": "inventory.apply",
		"DB_NAME": strings.Repeat("x", 64), "RETRY_MAX_ATTEMPTS": "many", "DLQ_TOPIC": "order-events"}
	_, err := loadConfig(func(k string) string { return env[k] })
	if err == nil {
		t.Fatal("loadConfig succeeded, want an error")
	}
	for _, want := range []string{"HTTP_ADDR", "LOG_LEVEL", "FAILPOINTS", "DB_NAME", "RETRY_MAX_ATTEMPTS", "DLQ_TOPIC"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
