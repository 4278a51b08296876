package devrun_test

import (
	"net"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/devrun"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name                    string
		env                     map[string]string
		dbURL, brokers, dataDir string
	}{
		{"defaults", nil, suite.DefaultDatabaseURL, "", ".data"},
		{"from the environment",
			map[string]string{"DATABASE_URL": "postgres://u:p@db:5432/x", "KAFKA_BROKERS": " k1:9092,k2:9092 ", "DATA_DIR": "/tmp/d"},
			"postgres://u:p@db:5432/x", "k1:9092,k2:9092", "/tmp/d"},
		{"blank means default", map[string]string{"DATABASE_URL": "  ", "DATA_DIR": ""}, suite.DefaultDatabaseURL, "", ".data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := devrun.LoadConfig(env(tt.env))
			if cfg.DatabaseURL != tt.dbURL || cfg.KafkaBrokers != tt.brokers || cfg.DataDir != tt.dataDir {
				t.Errorf("got %q %q %q, want %q %q %q", cfg.DatabaseURL, cfg.KafkaBrokers, cfg.DataDir, tt.dbURL, tt.brokers, tt.dataDir)
			}
			if len(cfg.Services) != len(suite.Services()) || cfg.BrokerAddr != "127.0.0.1:9092" || cfg.BinDir != "bin" {
				t.Errorf("defaults not filled in: %+v", cfg)
			}
			if err := cfg.Validate(); err != nil {
				t.Errorf("Validate() = %v", err)
			}
		})
	}
}

func TestLoadConfigControlAddr(t *testing.T) {
	tests := []struct {
		value, want string
	}{
		{"", devrun.DefaultControlAddr},
		{"127.0.0.1:9999", "127.0.0.1:9999"},
		{"off", ""},
	}
	for _, tt := range tests {
		if got := devrun.LoadConfig(env(map[string]string{"CONTROL_ADDR": tt.value})).ControlAddr; got != tt.want {
			t.Errorf("CONTROL_ADDR=%q: ControlAddr %q, want %q", tt.value, got, tt.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	valid := func() devrun.Config { return devrun.LoadConfig(env(nil)) }
	tests := []struct {
		name   string
		modify func(*devrun.Config)
	}{
		{"mysql URL", func(c *devrun.Config) { c.DatabaseURL = "mysql://root@localhost/x" }},
		{"broker without port", func(c *devrun.Config) { c.KafkaBrokers = "k1:9092,k2" }},
		{"embedded broker address without port", func(c *devrun.Config) { c.BrokerAddr = "localhost" }},
		{"no data dir", func(c *devrun.Config) { c.DataDir = "" }},
		{"no services", func(c *devrun.Config) { c.Services = nil }},
		{"duplicate port", func(c *devrun.Config) { c.Services[1].Port = c.Services[0].Port }},
		{"service without database", func(c *devrun.Config) { c.Services[2].DBName = "" }},
		{"zero ready timeout", func(c *devrun.Config) { c.ReadyTimeout = 0 }},
		{"negative grace", func(c *devrun.Config) { c.GracePeriod = -time.Second }},
		{"control address without port", func(c *devrun.Config) { c.ControlAddr = "localhost" }},
		{"control address on every interface", func(c *devrun.Config) { c.ControlAddr = ":8090" }},
		{"control address on another interface", func(c *devrun.Config) { c.ControlAddr = "192.168.1.2:8090" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid()
			tt.modify(&cfg)
			if err := cfg.Validate(); err == nil {
				t.Error("Validate accepted it")
			}
		})
	}
}

func TestServiceEnvOverridesInherited(t *testing.T) {
	all := suite.Services()
	inventory, _ := suite.Lookup(all, "inventory")
	inherited := []string{"PATH=/bin", "HTTP_ADDR=:9999", "DB_NAME=wrong", "CONSUMER_GROUP=shared", "LOG_LEVEL=debug"}
	got := lastValues(devrun.ServiceEnv(inherited, all, inventory, "postgres://x/y", "127.0.0.1:1234"))
	want := map[string]string{
		"PATH":             "/bin",
		"LOG_LEVEL":        "debug",
		"HTTP_ADDR":        "127.0.0.1:8083",
		"SUITE_MODE":       "development",
		"DB_NAME":          "inventory",
		"CONSUMER_GROUP":   "inventory-service",
		"DATABASE_URL":     "postgres://x/y",
		"KAFKA_BROKERS":    "127.0.0.1:1234",
		"ORDER_URL":        "http://127.0.0.1:8081",
		"NOTIFICATION_URL": "http://127.0.0.1:8085",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if len(inherited) != 5 || inherited[1] != "HTTP_ADDR=:9999" {
		t.Error("ServiceEnv changed the inherited slice")
	}
}

// lastValues reads an environment the way os/exec does: the last entry of a
// name wins.
func lastValues(environ []string) map[string]string {
	m := map[string]string{}
	for _, kv := range environ {
		for i := range len(kv) {
			if kv[i] == '=' {
				m[kv[:i]] = kv[i+1:]
				break
			}
		}
	}
	return m
}

// TestRunnerAddressesAreLoopback checks that every address the runner
// gives a service, its own and every scaled-out instance's, listens on
// loopback only, and that the services run in development mode with fail
// points and profiles enabled.
func TestRunnerAddressesAreLoopback(t *testing.T) {
	all := suite.Services()
	inherited := []string{"PATH=/bin", "HTTP_ADDR=0.0.0.0:9999"}
	for _, s := range all {
		env := devrun.ServiceEnv(inherited, all, s, "postgres://x/y", "127.0.0.1:1234")
		addrs := []string{lastValues(env)["HTTP_ADDR"]}
		for k := 2; k <= suite.MaxInstances; k++ {
			addrs = append(addrs, lastValues(devrun.InstanceEnv(env, devrun.InstancePort(s.Port, k)))["HTTP_ADDR"])
		}
		for _, addr := range addrs {
			host, _, err := net.SplitHostPort(addr)
			if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
				t.Errorf("%s: HTTP_ADDR=%q is not a loopback address", s.Name, addr)
			}
		}
		got := lastValues(env)
		for k, want := range map[string]string{"SUITE_MODE": "development", "FAILPOINTS_ENABLED": "true", "PPROF_ENABLED": "true"} {
			if got[k] != want {
				t.Errorf("%s: %s=%q, want %q", s.Name, k, got[k], want)
			}
		}
	}
	if err := devrun.LoadConfig(env(nil)).Validate(); err != nil {
		t.Errorf("the default configuration is refused: %v", err)
	}
}
