package devrun_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/devrun"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// fakeService is a stand-in for a real service: it reports the settings it
// was given, writes its pid to $FAKE_PID_DIR/<DB_NAME>, exits with status 3
// at once when FAKE_CRASH names its database or FAILPOINTS is
// "crash:<database>" (what a restart may set), answers /readyz, exits with
// status N on GET /exit?code=N (as an armed fail point would), and stops
// cleanly on SIGTERM.
const fakeService = `
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	db := os.Getenv("DB_NAME")
	if db == "" { // the console has no database
		db = "nodb"
	}
	fmt.Printf("db=%s group=%s http=%s\n", db, os.Getenv("CONSUMER_GROUP"), os.Getenv("HTTP_ADDR"))
	fmt.Fprintf(os.Stderr, "kafka=%s\n", os.Getenv("KAFKA_BROKERS"))
	fmt.Printf("failpoints=%s\n", os.Getenv("FAILPOINTS"))
	if os.Getenv("FAKE_CRASH") == db || os.Getenv("FAILPOINTS") == "crash:"+db {
		fmt.Println("crashing")
		os.Exit(3)
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	if err := os.WriteFile(filepath.Join(os.Getenv("FAKE_PID_DIR"), db), pid, 0o644); err != nil {
		panic(err)
	}
	srv := &http.Server{Addr: os.Getenv("HTTP_ADDR"), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/readyz":
		case "/exit":
			code, _ := strconv.Atoi(r.URL.Query().Get("code"))
			// Answer first, then exit, as a fail point in a relay would.
			time.AfterFunc(50*time.Millisecond, func() { os.Exit(code) })
		default:
			http.NotFound(w, r)
		}
	})}
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		panic(err)
	}
	fmt.Println("graceful stop")
}
`

// fakeRepo lays out a workspace with one fake service per name and returns
// its root.
func fakeRepo(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{}
	work := "go 1.26.0\n\nuse (\n"
	for _, name := range names {
		files["services/"+name+"/go.mod"] = "module example.com/" + name + "\n\ngo 1.26.0\n"
		files["services/"+name+"/main.go"] = fakeService
		work += "\t./services/" + name + "\n"
	}
	files["go.work"] = work + ")\n"
	writeFiles(t, dir, files)
	return dir
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func readPid(path string) (int, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(string(b))
	return pid, err == nil
}

func TestRun(t *testing.T) {
	url := databaseURL(t)
	tests := []struct {
		name string
		// crash is the database whose service exits at start.
		crash string
		// kill is the database whose service the test kills once all are ready.
		kill string
		// wantErr is what Run's error says; empty: Run returns nil on cancel.
		wantErr string
	}{
		{name: "runs until cancelled, then stops cleanly"},
		{name: "a service crashing at start stops everything", crash: "beta", wantErr: "beta exited before it was ready: exit status 3"},
		{name: "a service dying later stops everything", kill: "beta", wantErr: "beta exited unexpectedly: signal: killed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			alphaDB, betaDB := uniqueName("alpha"), uniqueName("beta")
			dropAfter(t, url, alphaDB, betaDB)
			dbOf := map[string]string{"alpha": alphaDB, "beta": betaDB}
			pidDir := t.TempDir()
			cfg := devrun.Config{
				DatabaseURL: url,
				DataDir:     t.TempDir(),
				Dir:         fakeRepo(t, "alpha", "beta", "gamma"),
				BinDir:      "bin",
				BrokerAddr:  "127.0.0.1:0",
				Services: []suite.Service{
					{Name: "alpha", Port: freePort(t), DBName: alphaDB, ConsumerGroup: "alpha-service", URLEnv: "ALPHA_URL"},
					{Name: "beta", Port: freePort(t), DBName: betaDB},
				},
				Console:      devrun.Console{Name: "gamma", Package: "./services/gamma", Port: freePort(t)},
				ReadyTimeout: time.Minute,
				GracePeriod:  10 * time.Second,
				Environ:      append(os.Environ(), "FAKE_PID_DIR="+pidDir, "FAKE_CRASH="+dbOf[tt.crash]),
			}
			out := &buffer{}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- devrun.Run(ctx, cfg, out) }()

			if tt.crash == "" {
				waitReady(t, out, done)
				for _, want := range []string{
					fmt.Sprintf("alpha | db=%s group=alpha-service http=127.0.0.1:%d\n", alphaDB, cfg.Services[0].Port),
					fmt.Sprintf("beta  | db=%s group= http=127.0.0.1:%d\n", betaDB, cfg.Services[1].Port),
					"alpha | kafka=127.0.0.1:",
					"run   | alpha is ready",
					fmt.Sprintf("beta-service           http://127.0.0.1:%d\n", cfg.Services[1].Port),
					// The console starts once the services are ready.
					fmt.Sprintf("gamma | db=nodb group= http=127.0.0.1:%d\n", cfg.Console.Port),
					"run   | gamma is ready",
					fmt.Sprintf("console                http://127.0.0.1:%d\n", cfg.Console.Port),
				} {
					if !strings.Contains(out.String(), want) {
						t.Errorf("output lacks %q", want)
					}
				}
				for _, db := range []string{alphaDB, betaDB} {
					if !databaseExists(t, url, db) {
						t.Errorf("database %s was not created", db)
					}
				}
			}
			if tt.kill != "" {
				pid, ok := readPid(filepath.Join(pidDir, dbOf[tt.kill]))
				if !ok {
					t.Fatal("no pid file")
				}
				if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			if tt.wantErr == "" {
				cancel()
			}

			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatalf("Run did not return; output:\n%s", out.String())
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Run() = %v after cancel, want nil", err)
				}
				for _, want := range []string{"alpha | graceful stop", "beta  | graceful stop", "gamma | graceful stop", "run   | embedded broker closed", "run   | stopped"} {
					if !strings.Contains(out.String(), want) {
						t.Errorf("output lacks %q:\n%s", want, out.String())
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Run() = %v, want an error saying %q; output:\n%s", err, tt.wantErr, out.String())
			}
			// A SIGTERM that reaches alpha before its main has installed the
			// handler (beta crashing at once, on a loaded machine) kills it
			// with the default action; its first line says the handler is in.
			started := strings.Contains(out.String(), "alpha | db=")
			if started && !strings.Contains(out.String(), "alpha | graceful stop") {
				t.Errorf("the surviving service was not stopped gracefully:\n%s", out.String())
			}
		})
	}
}

func TestRunFailsClearly(t *testing.T) {
	busy, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port

	tests := []struct {
		name    string
		modify  func(*devrun.Config)
		wantErr string
	}{
		{"not at the repository root", func(c *devrun.Config) { c.Dir = t.TempDir() }, "no go.work"},
		{"a port is taken", func(c *devrun.Config) { c.Services[0].Port = busyPort }, fmt.Sprintf("port %d of alpha-service is taken", busyPort)},
		{"a service does not compile", func(c *devrun.Config) {
			writeFiles(t, c.Dir, map[string]string{"services/beta/main.go": "package main\n\nfunc main() { nope() }\n"})
		}, "build beta-service (go build -o bin/beta-service ./services/beta)"},
		{"invalid configuration", func(c *devrun.Config) { c.DatabaseURL = "mysql://x" }, "want a postgres:// URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := devrun.Config{
				DatabaseURL: suite.DefaultDatabaseURL, DataDir: t.TempDir(), Dir: fakeRepo(t, "alpha", "beta"), BinDir: "bin",
				BrokerAddr: "127.0.0.1:0", ReadyTimeout: time.Minute, GracePeriod: time.Second,
				Services: []suite.Service{{Name: "alpha", Port: freePort(t), DBName: "a"}, {Name: "beta", Port: freePort(t), DBName: "b"}},
			}
			tt.modify(&cfg)
			err := devrun.Run(context.Background(), cfg, &buffer{})
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Run() = %v, want an error saying %q", err, tt.wantErr)
			}
		})
	}
}

func TestRunInterruptedBeforeStartReturnsNil(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := devrun.Config{
		DatabaseURL: suite.DefaultDatabaseURL, DataDir: t.TempDir(), Dir: fakeRepo(t, "alpha"), BinDir: "bin",
		BrokerAddr: "127.0.0.1:0", ReadyTimeout: time.Minute, GracePeriod: time.Second,
		Services: []suite.Service{{Name: "alpha", Port: freePort(t), DBName: "a"}},
	}
	out := &buffer{}
	if err := devrun.Run(ctx, cfg, out); err != nil {
		t.Fatalf("Run() = %v, want nil for an interrupt", err)
	}
	if !strings.Contains(out.String(), "stopped") {
		t.Errorf("output does not say it stopped:\n%s", out.String())
	}
}

// waitReady waits until the runner says the suite is ready; on a timeout or
// an early return it fails with what the runner printed, which says why.
func waitReady(t *testing.T, out *buffer, done <-chan error) {
	t.Helper()
	deadline := time.NewTimer(2 * time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(out.String(), "The suite is ready") {
		select {
		case err := <-done:
			t.Fatalf("Run returned before the suite was ready: %v\n%s", err, out.String())
		case <-deadline.C:
			t.Fatalf("the suite was not ready after 2m; the runner printed:\n%s", out.String())
		case <-tick.C:
		}
	}
}
