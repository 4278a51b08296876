package main

import "testing"

// The settings every service and every consumer shares are read and
// tested in pkg/service and pkg/consumer; this covers inventory's defaults.

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
