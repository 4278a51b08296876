// Command faultproxy is the compose suite's Kafka fault proxy
// (scripts/internal/faultproxy): the order service reaches Redpanda through
// it, and `make compose-control` arms a lost acknowledgement on it for the
// loss/lost-ack drill (docs/drills.md (Drills under compose)). Unarmed it
// relays every byte unchanged.
//
//	FAULTPROXY_LISTEN=:9092 FAULTPROXY_UPSTREAM=redpanda:29092 FAULTPROXY_ADMIN_ADDR=:9094 go run ./scripts/faultproxy
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
	"github.com/reliable-orders/fulfillment/scripts/internal/faultproxy"
)

func main() {
	cli.Main("faultproxy", "", func(ctx context.Context, _ []string, getenv func(string) string, stdout, _ io.Writer) error {
		return run(ctx, getenv, stdout)
	})
}

// config is the proxy's and its admin API's settings.
type config struct {
	proxy faultproxy.Config
	admin string
}

func loadConfig(getenv func(string) string) (config, error) {
	env := envconfig.New(getenv)
	cfg := config{
		proxy: faultproxy.Config{
			Listen:      env.String("FAULTPROXY_LISTEN", ":9092"),
			Upstream:    env.String("FAULTPROXY_UPSTREAM", "redpanda:29092"),
			DialTimeout: env.Duration("FAULTPROXY_DIAL_TIMEOUT", 3*time.Second),
		},
		admin: env.String("FAULTPROXY_ADMIN_ADDR", ":9094"),
	}
	if err := env.Err(); err != nil {
		return cfg, err
	}
	if _, _, err := net.SplitHostPort(cfg.admin); err != nil {
		return cfg, fmt.Errorf("FAULTPROXY_ADMIN_ADDR %q: %w", cfg.admin, err)
	}
	return cfg, cfg.proxy.Validate()
}

func run(ctx context.Context, getenv func(string) string, stdout io.Writer) error {
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	p, err := faultproxy.Listen(cfg.proxy, stdout)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.admin)
	if err != nil {
		return errors.Join(err, p.Close())
	}
	srv := &http.Server{Handler: p.Handler(), ReadHeaderTimeout: 5 * time.Second}
	adminDone := make(chan error, 1)
	go func() { adminDone <- srv.Serve(ln) }()
	fmt.Fprintf(stdout, "faultproxy | Kafka on %s → %s, admin API on %s\n", p.Addr(), cfg.proxy.Upstream, ln.Addr())
	serveErr := p.Serve(ctx)
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	shutdownErr := srv.Shutdown(shutdownCtx)
	if err := <-adminDone; !errors.Is(err, http.ErrServerClosed) {
		serveErr = errors.Join(serveErr, err)
	}
	return errors.Join(serveErr, shutdownErr)
}
