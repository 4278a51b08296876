package main

import "testing"

// The settings every service and every consumer shares are read and
// tested in pkg/service and pkg/consumer; this covers notification's defaults.

func TestLoadConfigDefaults(t *testing.T) {
	c, err := loadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	if c.HTTPAddr != ":8085" || c.DBName != "notification" || c.Consumer.ConsumerGroup != "notification-service" ||
		c.LogLevel != "info" || c.AdminToken != "" || c.FailPoints != "" {
		t.Fatalf("defaults = %+v", c)
	}
}
