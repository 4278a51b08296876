// Package devrun is `make run`: it builds the six services, creates their
// databases, starts the embedded broker when no KAFKA_BROKERS is given, runs
// the services as supervised child processes, waits until they are ready and
// prints how to use them. Run stops everything when its context ends.
package devrun

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// Config is everything Run needs. LoadConfig fills it from the environment.
type Config struct {
	// DatabaseURL is the Postgres server (DATABASE_URL).
	DatabaseURL string
	// KafkaBrokers are external brokers (KAFKA_BROKERS); empty starts the
	// embedded broker on BrokerAddr.
	KafkaBrokers string
	// DataDir holds the embedded broker's log under DataDir/broker (DATA_DIR).
	DataDir string
	// Dir is the repository root: where go.work is and builds run.
	Dir string
	// BinDir receives the binaries; relative paths are relative to Dir.
	BinDir string
	// BrokerAddr is where the embedded broker listens.
	BrokerAddr string
	// Services are the services to build and run, in start order.
	Services []suite.Service
	// ReadyTimeout bounds the wait for every /readyz to answer 200.
	ReadyTimeout time.Duration
	// GracePeriod is how long a service has to stop after SIGTERM.
	GracePeriod time.Duration
	// Colour colours each service's prefix.
	Colour bool
	// Environ is the environment the services inherit; nil means the
	// runner's own.
	Environ []string
	// ControlAddr is where the control API listens (CONTROL_ADDR); empty
	// runs without it.
	ControlAddr string
	// Console is the learner's console, started once the services are
	// ready; a zero Port runs without it.
	Console Console
}

// Console is the learner's console as the runner builds and starts it.
type Console struct {
	// Name names its binary and prefixes its lines.
	Name string
	// Package is its main package, relative to Dir.
	Package string
	// Port is where it listens, on 127.0.0.1.
	Port int
}

// LocalURL is the console's base URL on this machine.
func (c Console) LocalURL() string { return "http://" + suite.LoopbackAddr(c.Port) }

// Defaults of the settings that are not environment variables.
const (
	DefaultDataDir      = ".data"          // DATA_DIR when unset
	DefaultBinDir       = "bin"            // where the binaries go
	DefaultReadyTimeout = 90 * time.Second // for every /readyz to answer 200
	DefaultGracePeriod  = 10 * time.Second // between SIGTERM and SIGKILL
	DefaultControlAddr  = "127.0.0.1:8090" // CONTROL_ADDR when unset
	// ControlOff as CONTROL_ADDR runs without the control API.
	ControlOff = "off"
)

// LoadConfig reads DATABASE_URL, KAFKA_BROKERS, DATA_DIR and CONTROL_ADDR
// (README.md (Configuration)) and fills in the defaults of everything else.
func LoadConfig(getenv func(string) string) Config {
	env := envconfig.New(getenv)
	control := env.String("CONTROL_ADDR", DefaultControlAddr)
	if control == ControlOff {
		control = ""
	}
	return Config{
		ControlAddr:  control,
		DatabaseURL:  env.String("DATABASE_URL", suite.DefaultDatabaseURL),
		KafkaBrokers: env.String("KAFKA_BROKERS", ""),
		DataDir:      env.String("DATA_DIR", DefaultDataDir),
		Dir:          ".",
		BinDir:       DefaultBinDir,
		BrokerAddr:   suite.DefaultKafkaBrokers,
		Services:     suite.Services(),
		Console:      Console{Name: suite.ConsoleName, Package: suite.ConsolePackage, Port: suite.ConsolePort},
		ReadyTimeout: DefaultReadyTimeout,
		GracePeriod:  DefaultGracePeriod,
	}
}

// Validate reports every setting Run cannot work with.
func (c Config) Validate() error {
	var errs []error
	if u, err := url.Parse(c.DatabaseURL); err != nil {
		errs = append(errs, fmt.Errorf("DATABASE_URL: %w", err))
	} else if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		errs = append(errs, fmt.Errorf("DATABASE_URL %q: want a postgres:// URL", u.Redacted()))
	}
	if c.KafkaBrokers != "" {
		for _, b := range strings.Split(c.KafkaBrokers, ",") {
			if _, _, err := net.SplitHostPort(strings.TrimSpace(b)); err != nil {
				errs = append(errs, fmt.Errorf("KAFKA_BROKERS: %w", err))
			}
		}
	} else if _, _, err := net.SplitHostPort(c.BrokerAddr); err != nil {
		errs = append(errs, fmt.Errorf("broker address: %w", err))
	}
	if c.ControlAddr != "" {
		if err := checkLoopback(c.ControlAddr); err != nil {
			errs = append(errs, fmt.Errorf("CONTROL_ADDR (127.0.0.1:port, or %q): %w", ControlOff, err))
		}
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("DATA_DIR is empty"))
	}
	if c.Dir == "" || c.BinDir == "" {
		errs = append(errs, errors.New("repository and bin directories are required"))
	}
	if len(c.Services) == 0 {
		errs = append(errs, errors.New("no services to run"))
	}
	names, ports := map[string]bool{}, map[int]bool{}
	for _, s := range c.Services {
		if s.Name == "" || s.DBName == "" || s.Port <= 0 || s.Port > 65535 {
			errs = append(errs, fmt.Errorf("service %+v: name, database and a port are required", s))
		}
		if names[s.Name] || ports[s.Port] {
			errs = append(errs, fmt.Errorf("service %s: name or port %d used twice", s.Name, s.Port))
		}
		names[s.Name], ports[s.Port] = true, true
	}
	if c.Console.Port != 0 {
		if c.Console.Name == "" || c.Console.Package == "" || c.Console.Port < 0 || c.Console.Port > 65535 {
			errs = append(errs, fmt.Errorf("console %+v: name, package and a port are required", c.Console))
		}
		if names[c.Console.Name] || ports[c.Console.Port] {
			errs = append(errs, fmt.Errorf("console: name %s or port %d is a service's", c.Console.Name, c.Console.Port))
		}
	}
	if err := CheckInstancePorts(c.Services, append(addrPorts(c.ControlAddr, c.BrokerAddr), c.Console.Port)...); err != nil {
		errs = append(errs, fmt.Errorf("ports of scaled-out instances: %w", err))
	}
	if c.ReadyTimeout <= 0 || c.GracePeriod <= 0 {
		errs = append(errs, errors.New("ready timeout and grace period must be positive"))
	}
	return errors.Join(errs...)
}
