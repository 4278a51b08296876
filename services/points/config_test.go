package main

import "testing"

// The settings every service and every consumer shares are read and
// tested in pkg/service and pkg/consumer; this covers points's defaults.

func TestLoadConfigDefaults(t *testing.T) {
	c, err := loadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	if c.HTTPAddr != ":8084" || c.DBName != "points" || c.Consumer.ConsumerGroup != "points-service" ||
		c.LogLevel != "info" || c.AdminToken != "" || c.FailPoints != "" {
		t.Fatalf("defaults = %+v", c)
	}
}
