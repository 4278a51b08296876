package main

import (
	"strings"
	"testing"
)

func TestLoadConfig(t *testing.T) {
	const token = "0123456789abcdef0123456789abcdef"
	tests := []struct {
		name     string
		env      map[string]string
		wantErr  string
		wantAddr string
	}{
		{"development on loopback needs no token", map[string]string{"SUITE_MODE": "development"}, "", "127.0.0.1:8087"},
		{"production needs a token", map[string]string{}, "ADMIN_TOKEN is not set", ""},
		{"production refuses a published token", map[string]string{"ADMIN_TOKEN": "test-admin-token"}, "published development value", ""},
		{"production with a token listens everywhere", map[string]string{"ADMIN_TOKEN": token}, "", ":8087"},
		{"development beyond loopback needs a token", map[string]string{"SUITE_MODE": "development", "HTTP_ADDR": ":8087"}, "listens beyond loopback", ""},
		{"an unknown mode", map[string]string{"SUITE_MODE": "staging", "ADMIN_TOKEN": token}, `SUITE_MODE="staging"`, ""},
		{"a bad URL", map[string]string{"SUITE_MODE": "development", "ORDER_URL": "::"}, "ORDER_URL", ""},
		{"an upstream timeout out of range", map[string]string{"SUITE_MODE": "development", "CONSOLE_UPSTREAM_TIMEOUT": "1ms"}, "CONSOLE_UPSTREAM_TIMEOUT", ""},
		{"a bad log level", map[string]string{"SUITE_MODE": "development", "LOG_LEVEL": "loud"}, "LOG_LEVEL", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadConfig(func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.HTTPAddr != tt.wantAddr || cfg.URLs["order"] != "http://127.0.0.1:8081" {
				t.Errorf("addr %q, order URL %q", cfg.HTTPAddr, cfg.URLs["order"])
			}
		})
	}
}
