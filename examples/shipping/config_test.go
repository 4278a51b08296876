package main

import (
	"strings"
	"testing"
)

// The settings every service and every consumer shares are read and
// tested in pkg/service and pkg/consumer; this covers shipping's defaults.

func TestLoadConfigDefaults(t *testing.T) {
	c, err := loadConfig(func(k string) string {
		if k == "SUITE_MODE" {
			return "development"
		}
		return ""
	})
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	if c.HTTPAddr != "127.0.0.1:8087" || c.DBName != "shipping" || c.Consumer.ConsumerGroup != "shipping-service" ||
		c.LogLevel != "info" || c.AdminToken != "" || c.FailPoints != "" {
		t.Fatalf("defaults = %+v", c)
	}
}

// TestLoadConfigRefusesNoAdminToken checks that outside development mode
// the service does not start without an ADMIN_TOKEN.
func TestLoadConfigRefusesNoAdminToken(t *testing.T) {
	_, err := loadConfig(func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "ADMIN_TOKEN") {
		t.Fatalf("loadConfig without ADMIN_TOKEN = %v, want an error naming ADMIN_TOKEN", err)
	}
}
