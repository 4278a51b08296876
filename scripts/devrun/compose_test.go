package devrun_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/reliable-orders/fulfillment/scripts/backlog"
	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/devrun"
	"github.com/reliable-orders/fulfillment/scripts/drill"
	"github.com/reliable-orders/fulfillment/scripts/internal/faultproxy"
	"github.com/reliable-orders/fulfillment/scripts/internal/faultproxy/faultproxytest"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// fakeDocker is a docker executable written by the test: there is no
// Docker engine where the tests run, so the compose backend is driven
// through the real DockerCLI against this script, which records each call
// (and the override files a call names) and answers `ps` with the JSON the
// test put in its ps file.
type fakeDocker struct {
	path, log, overrides, ps string
}

func newFakeDocker(t *testing.T) *fakeDocker {
	t.Helper()
	dir := t.TempDir()
	f := &fakeDocker{
		path:      filepath.Join(dir, "docker"),
		log:       filepath.Join(dir, "calls"),
		overrides: filepath.Join(dir, "overrides"),
		ps:        filepath.Join(dir, "ps.json"),
	}
	script := fmt.Sprintf(`#!/bin/sh
echo "$* (FAILPOINTS_ENABLED=$FAILPOINTS_ENABLED)" >> %[1]q
prev=
for a in "$@"; do
	if [ "$prev" = -f ] && [ "$a" != docker-compose.yml ]; then cat "$a" >> %[2]q; echo >> %[2]q; fi
	prev=$a
done
case " $* " in *" ps "*) cat %[3]q ;; esac
`, f.log, f.overrides, f.ps)
	if err := os.WriteFile(f.path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// setPS makes `docker compose ps` answer these containers, one JSON object
// a line as compose v2.21 and later print them.
func (f *fakeDocker) setPS(t *testing.T, lines ...string) {
	t.Helper()
	if err := os.WriteFile(f.ps, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (f *fakeDocker) calls(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(f.log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(raw)), "\n")
}

func (f *fakeDocker) read(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(raw)
}

// readyServer answers /readyz 200 on 127.0.0.1:port until the test ends.
func readyServer(t *testing.T, ln net.Listener) {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
		}
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

// consumerPorts finds a free port P whose instance port P+100 is free too,
// and listens on both.
func consumerPorts(t *testing.T) (int, net.Listener, net.Listener) {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln2, err := net.Listen("tcp", suite.LoopbackAddr(devrun.InstancePort(port, 2)))
		if err == nil {
			return port, ln, ln2
		}
		ln.Close()
	}
	t.Fatal("no free pair of ports")
	return 0, nil, nil
}

func listen(t *testing.T) (int, net.Listener) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln.Addr().(*net.TCPAddr).Port, ln
}

// The compose backend meets the drills' Controller, BrokerController and
// ServiceStopper and the backlog drill's Scaler and Lister through the
// same clients `make run`'s control API has, each request carried out as
// the docker compose command the decision names.
func TestComposeControlDrivesDockerCompose(t *testing.T) {
	// The docker calls outside compose must not inherit one from the
	// test's environment.
	t.Setenv("FAILPOINTS_ENABLED", "")
	docker := newFakeDocker(t)
	orderPort, orderLn := listen(t)
	readyServer(t, orderLn)
	invPort, invLn, inv2Ln := consumerPorts(t)
	readyServer(t, invLn)
	readyServer(t, inv2Ln)
	running := func(svc string) string {
		return fmt.Sprintf(`{"Name":"fulfillment-%[1]s-1","Service":%[1]q,"State":"running","Health":"healthy","ExitCode":0}`, svc)
	}
	docker.setPS(t, running("order-service"), running("inventory-service"), running("redpanda"))

	proxy := faultproxytest.Start(t, 1, suite.OrderEventsTopic)
	admin := httptest.NewServer(proxy.Handler())
	defer admin.Close()

	cfg := devrun.LoadComposeConfig(func(string) string { return "" })
	cfg.Docker = docker.path
	cfg.FaultProxyURL = admin.URL
	cfg.PollInterval = 10 * time.Millisecond
	cfg.ReadyTimeout = 5 * time.Second
	cfg.Services = []suite.Service{
		{Name: "order", Port: orderPort, DBName: "orders"},
		{Name: "inventory", Port: invPort, DBName: "inventory", ConsumerGroup: "inventory-service"},
	}
	var log buffer
	cc, err := devrun.NewComposeControl(cfg, devrun.DockerCLI{Path: docker.path, Dir: t.TempDir()}, &log)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(cc.Handler())
	defer api.Close()
	ctx := context.Background()

	c := drill.NewControlClient(api.URL, 5*time.Second)
	var (
		_ drill.Controller       = c
		_ drill.BrokerController = c
		_ drill.ServiceStopper   = c
	)
	if _, err := c.Services(ctx); err != nil {
		t.Fatal(err)
	}

	// A crash drill: restart with a fail point, the container exits 137.
	if _, err := c.Restart(ctx, drill.Order, map[string]string{"FAILPOINTS": "relay.after-publish=exit"}); err != nil {
		t.Fatal(err)
	}
	override := docker.read(t, docker.overrides)
	for _, want := range []string{`"order-service"`, `"restart":"no"`, `"FAILPOINTS":"relay.after-publish=exit"`, `"FAILPOINTS_ENABLED":"true"`} {
		if !strings.Contains(override, want) {
			t.Errorf("the restart's compose override %s lacks %s", override, want)
		}
	}
	docker.setPS(t, `{"Name":"fulfillment-order-service-1","Service":"order-service","State":"exited","ExitCode":137}`,
		running("inventory-service"), running("redpanda"))
	v, err := c.Exit(ctx, drill.Order, 5*time.Second)
	if err != nil || v.ExitCode == nil || *v.ExitCode != devrun.FailPointExitCode {
		t.Errorf("Exit = %+v, %v; want exit code %d", v, err, devrun.FailPointExitCode)
	}
	// Back with its usual environment: no override.
	docker.setPS(t, running("order-service"), running("inventory-service"), running("redpanda"))
	if err := os.Remove(docker.overrides); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Restart(ctx, drill.Order, nil); err != nil {
		t.Fatal(err)
	}
	if got := docker.read(t, docker.overrides); got != "" {
		t.Errorf("a restart without env wrote an override: %s", got)
	}

	// An outage: the service stopped, the broker stopped and started.
	if _, err := c.Stop(ctx, drill.Order); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Exit(ctx, drill.Order, 5*time.Second); err != nil || v.ExitCode != nil {
		t.Errorf("Exit of a stopped service = %+v, %v; want no exit code", v, err)
	}
	for _, call := range []func(context.Context) (controlapi.BrokerView, error){c.ClearFault, c.StopBroker, c.StartBroker} {
		if _, err := call(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A lost acknowledgement is armed on the fault proxy the order
	// service's producer passes; the hits are the proxy's.
	if _, err := c.ArmFault(ctx, controlapi.FaultRequest{Type: controlapi.FaultLostAck, Topic: suite.OrderEventsTopic, Count: 2}); err != nil {
		t.Fatal(err)
	}
	produceThrough(t, proxy, suite.OrderEventsTopic)
	if b, err := c.Broker(ctx); err != nil || b.Fault == nil || b.Fault.Hits != 2 {
		t.Errorf("Broker = %+v, %v; want a fault with 2 hits", b, err)
	}
	if _, err := c.ClearFault(ctx); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Broker(ctx); err != nil || b.Fault != nil {
		t.Errorf("Broker after ClearFault = %+v, %v; want no fault armed", b, err)
	}

	// The backlog drill: scale out to 2 and back to 1.
	bc := backlog.NewControlClient(api.URL)
	if err := bc.Scale(ctx, "inventory", 2); err != nil {
		t.Fatal(err)
	}
	// Should ps list the one-off container too, the service's own is
	// still the one its state is read from.
	docker.setPS(t, running("order-service"), running("inventory-service"), running("redpanda"),
		`{"Name":"fulfillment-inventory-service-extra-2","Service":"inventory-service","State":"exited","ExitCode":2}`)
	insts, err := bc.Instances(ctx, "inventory")
	if err != nil {
		t.Fatal(err)
	}
	wantURL := "http://" + suite.LoopbackAddr(devrun.InstancePort(invPort, 2))
	if len(insts) != 2 || insts[1].Name != "inventory#2" || insts[1].URL != wantURL {
		t.Errorf("instances %+v, want inventory and inventory#2 at %s", insts, wantURL)
	}
	if err := bc.Scale(ctx, "order", 2); err == nil || !strings.Contains(err.Error(), "not a consumer") {
		t.Errorf("scaling the order service = %v, want 'not a consumer'", err)
	}
	if err := bc.Scale(ctx, "inventory", 1); err != nil {
		t.Fatal(err)
	}
	if insts, err := bc.Instances(ctx, "inventory"); err != nil || len(insts) != 1 {
		t.Errorf("after scaling in: %+v, %v; want inventory alone", insts, err)
	}

	extra := "fulfillment-inventory-service-extra-2"
	want := []string{
		"up -d --no-deps --force-recreate order-service",
		"up -d --no-deps --force-recreate order-service",
		"compose -p fulfillment -f docker-compose.yml stop order-service",
		"compose -p fulfillment -f docker-compose.yml stop redpanda",
		"compose -p fulfillment -f docker-compose.yml start redpanda",
		fmt.Sprintf("run -d --no-deps --name %s -p 127.0.0.1:%d:%d inventory-service", extra, devrun.InstancePort(invPort, 2), invPort),
		"stop " + extra,
		"rm " + extra,
	}
	var changes []string
	for _, call := range docker.calls(t) {
		if !strings.Contains(call, " ps ") {
			changes = append(changes, call)
		}
	}
	if len(changes) != len(want) {
		t.Fatalf("docker calls besides ps:\n%s\nwant %d like:\n%s", strings.Join(changes, "\n"), len(want), strings.Join(want, "\n"))
	}
	for i, w := range want {
		if strings.HasPrefix(w, "compose") || strings.HasPrefix(w, "up") || strings.HasPrefix(w, "run") {
			w += " (FAILPOINTS_ENABLED=true)"
		} else {
			w += " (FAILPOINTS_ENABLED=)"
		}
		if !strings.HasSuffix(changes[i], w) {
			t.Errorf("docker call %d = %q, want one ending %q", i+1, changes[i], w)
		}
	}
	if err := cc.Close(ctx); err != nil {
		t.Error(err)
	}
}

// produceThrough writes one record to topic through the proxy only, as the
// order service's producer reaches Redpanda's listener that advertises the
// proxy (kfake advertises itself, so the dialer stands in for that).
func produceThrough(t *testing.T, p *faultproxy.Proxy, topic string) {
	t.Helper()
	var d net.Dialer
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.Addr()),
		kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, p.Addr())
		}),
		kgo.DisableIdempotentWrite(),
		kgo.MetadataMinAge(10*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// Without its fault proxy (a compose file without the service, or the
// service down) the compose backend clears nothing and refuses to arm with
// 409, which the lost-ack drill reports as SKIP, with the reason.
func TestComposeControlWithoutFaultProxy(t *testing.T) {
	docker := newFakeDocker(t)
	docker.setPS(t, `{"Name":"fulfillment-redpanda-1","Service":"redpanda","State":"running","Health":"healthy","ExitCode":0}`)
	_, ln := listen(t)
	ln.Close() // nothing answers there
	cfg := devrun.LoadComposeConfig(func(string) string { return "" })
	cfg.Docker, cfg.FaultProxyURL = docker.path, "http://"+ln.Addr().String()
	cc, err := devrun.NewComposeControl(cfg, devrun.DockerCLI{Path: docker.path, Dir: t.TempDir()}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cc.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	api := httptest.NewServer(cc.Handler())
	defer api.Close()
	c := drill.NewControlClient(api.URL, 5*time.Second)
	ctx := context.Background()
	if _, err := c.ClearFault(ctx); err != nil {
		t.Errorf("ClearFault = %v, want nil: nothing is armed", err)
	}
	// 409, which the drills take for no control of the broker.
	var status *controlapi.StatusError
	arm := func(count int) error {
		_, err := c.ArmFault(ctx, controlapi.FaultRequest{Type: controlapi.FaultLostAck, Topic: suite.OrderEventsTopic, Count: count})
		return err
	}
	if err := arm(4); !errors.As(err, &status) || status.Status != http.StatusConflict || !strings.Contains(err.Error(), "fault proxy") {
		t.Errorf("ArmFault = %v, want 409 naming the fault proxy", err)
	}
	// A body the API cannot arm is refused before the proxy is asked.
	if err := arm(1001); !errors.As(err, &status) || status.Status != http.StatusBadRequest {
		t.Errorf("ArmFault of 1001 = %v, want 400", err)
	}
}

// A restart whose container exits before it is ready is answered 502 with
// the exit, as make run answers a service that dies during a restart; a
// variable outside the allowed ones is refused before docker runs.
func TestComposeControlRestartFailures(t *testing.T) {
	docker := newFakeDocker(t)
	port, ln := listen(t)
	ln.Close() // nothing answers /readyz
	docker.setPS(t, `[{"Name":"fulfillment-order-service-1","Service":"order-service","State":"exited","ExitCode":1}]`)
	cfg := devrun.LoadComposeConfig(func(string) string { return "" })
	cfg.Docker, cfg.PollInterval, cfg.ReadyTimeout = docker.path, 10*time.Millisecond, 5*time.Second
	cfg.Services = []suite.Service{{Name: "order", Port: port, DBName: "orders"}}
	cc, err := devrun.NewComposeControl(cfg, devrun.DockerCLI{Path: docker.path, Dir: t.TempDir()}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cc.Close(context.Background()); err != nil {
			t.Error(err)
		}
	})
	api := httptest.NewServer(cc.Handler())
	defer api.Close()
	c := drill.NewControlClient(api.URL, 5*time.Second)

	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"exits before ready", map[string]string{"FAILPOINTS": "nonsense"}, "502: order did not become ready after the restart: order exited: exit status 1"},
		{"variable not allowed", map[string]string{"DATABASE_URL": "postgres://elsewhere"}, "400: env: a restart may not set DATABASE_URL"},
		{"unknown service", nil, "404"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			service := drill.Order
			if tt.want == "404" {
				service = "nope"
			}
			_, err := c.Restart(context.Background(), service, tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Restart = %v, want %q", err, tt.want)
			}
		})
	}
	ups := 0
	for _, call := range docker.calls(t) {
		if strings.Contains(call, " up ") {
			ups++
		}
	}
	if ups != 1 {
		t.Errorf("docker compose up ran %d times, want once (only the allowed restart)", ups)
	}
}
