package harness

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

var (
	consoleOnce sync.Once
	consoleErr  error
)

// consoleBinary builds services/console once per test binary, next to the
// services' binaries.
func consoleBinary() (string, error) {
	dir, err := binaries()
	if err != nil {
		return "", err
	}
	consoleOnce.Do(func() {
		root, err := repoRoot()
		if err != nil {
			consoleErr = err
			return
		}
		cmd := exec.Command("go", "build", "-o", filepath.Join(dir, "console"), "./services/console")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			consoleErr = fmt.Errorf("build the console: %w\n%s", err, out)
		}
	})
	return filepath.Join(dir, "console"), consoleErr
}

// StartConsole builds and starts the console (services/console) in front
// of the suite, in development mode on a free loopback port with the
// suite's admin token, plus env; it is stopped when the test ends. It
// returns the console's base URL once it is ready.
func (s *Suite) StartConsole(env map[string]string) string {
	s.t.Helper()
	if _, err := consoleBinary(); err != nil {
		s.t.Fatal(err)
	}
	ports, err := freePorts(1)
	if err != nil {
		s.t.Fatal(err)
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	vars := map[string]string{
		"SUITE_MODE":         "development",
		"HTTP_ADDR":          fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"ADMIN_TOKEN":        s.AdminToken,
		"LOG_LEVEL":          "debug",
		"KAFKA_BROKERS":      strings.Join(s.Broker.Addrs(), ","),
		"ORDER_EVENTS_TOPIC": s.Topic,
		"DLQ_TOPIC":          s.DLQTopic,
	}
	for _, name := range Services {
		vars[strings.ToUpper(name)+"_URL"] = s.urls[name]
	}
	// The drills it runs wait as the consumers retry. No DATABASE_URL:
	// the suite's databases are not make run's, so its drills leave what
	// they plant.
	for _, kv := range s.env["inventory"] {
		name, value, _ := strings.Cut(kv, "=")
		switch name {
		case "CALLBACK_SECRET", "RETRY_MAX_ATTEMPTS", "RETRY_INITIAL_INTERVAL", "RETRY_MAX_INTERVAL", "PARK_DEADLINE":
			vars[name] = value
		}
	}
	for k, v := range env {
		vars[k] = v
	}
	list := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range vars {
		list = append(list, k+"="+v)
	}
	cmd, done, err := s.spawn("console", "console", list)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() {
		stopProcess(cmd, done)
		if s.t.Failed() {
			s.t.Logf("---- console log (tail) ----\n%s", s.logTail("console"))
		}
	})
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	s.WaitUntil(60*time.Second, "console ready", func() bool {
		if closed(done) {
			s.t.Fatalf("the console exited during start:\n%s", s.logTail("console"))
		}
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	return base
}

// ConsoleStep is one step of an order's journey as the console shows it,
// in its timeline (GET /api/orders/{orderId}/timeline) and as a row of its
// page.
type ConsoleStep struct {
	Service, Step, EventType string
	// Detail is the span's name: "POST /payments".
	Detail string
}

func (s ConsoleStep) String() string {
	return strings.Join(strings.Fields(s.Service+" "+s.Step+" "+s.EventType+" "+s.Detail), " ")
}

// JourneyStep is a step a journey must show after the step it follows.
type JourneyStep struct {
	ConsoleStep
	// After is the index in the journey of the step it follows; -1 for
	// the first.
	After int
}

// PaidJourney is a payment's path through the five services, each step
// after the one it follows: the payment request, its callback through the
// payment's outbox, the order's change and OrderPaid through its outbox and
// relay, and each consumer's receipt and apply, the consumers side by side.
func PaidJourney() []JourneyStep {
	steps := []JourneyStep{
		{ConsoleStep{"payment", "request accepted", "", "POST /payments"}, -1},
		{ConsoleStep{"payment", "outbox committed", "PAYMENT_SUCCEEDED", ""}, 0},
		{ConsoleStep{"payment", "callback sent", "PAYMENT_SUCCEEDED", ""}, 1},
		{ConsoleStep{"order", "callback received", "", "POST /payments/callback"}, 2},
		{ConsoleStep{"order", "outbox committed", "OrderPaid", ""}, 3},
		{ConsoleStep{"order", "sent", "OrderPaid", ""}, 4},
	}
	for _, c := range []string{"inventory", "points", "notification"} {
		steps = append(steps, JourneyStep{ConsoleStep{c, "received", "OrderPaid", ""}, 5},
			JourneyStep{ConsoleStep{c, "applied", "OrderPaid", ""}, len(steps)})
	}
	return steps
}

// FindJourney finds each step of want among steps, in their order: the
// index of its first step after the step it follows, or -1 when it is not
// there. A step of want with an empty EventType or Detail matches any.
func FindJourney(steps []ConsoleStep, want []JourneyStep) []int {
	out := make([]int, len(want))
	for i, w := range want {
		out[i] = -1
		start := 0
		if w.After >= 0 {
			if out[w.After] < 0 {
				continue
			}
			start = out[w.After] + 1
		}
		for j := start; j < len(steps); j++ {
			s := steps[j]
			if s.Service == w.Service && s.Step == w.Step && (w.EventType == "" || s.EventType == w.EventType) &&
				(w.Detail == "" || s.Detail == w.Detail) {
				out[i] = j
				break
			}
		}
	}
	return out
}
