package main

import "testing"

// The settings every service and every consumer shares are read and
// tested in pkg/service and pkg/consumer; this covers shipping's defaults.

func TestLoadConfigDefaults(t *testing.T) {
	c, err := loadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	if c.HTTPAddr != ":8087" || c.DBName != "shipping" || c.Consumer.ConsumerGroup != "shipping-service" ||
		c.LogLevel != "info" || c.AdminToken != "" || c.FailPoints != "" {
		t.Fatalf("defaults = %+v", c)
	}
}
