package devrun_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/scripts/devrun"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

func TestInstanceNamesAndPorts(t *testing.T) {
	tests := []struct {
		service  string
		k, port  int
		name     string
		wantPort int
	}{
		{"inventory", 1, 8083, "inventory", 8083},
		{"inventory", 2, 8083, "inventory#2", 8183},
		{"notification", 6, 8085, "notification#6", 8585},
		{"points", devrun.MaxInstances, 8084, fmt.Sprintf("points#%d", devrun.MaxInstances), 8084 + 100*(devrun.MaxInstances-1)},
	}
	for _, tt := range tests {
		if got := devrun.InstanceName(tt.service, tt.k); got != tt.name {
			t.Errorf("InstanceName(%s, %d) = %q, want %q", tt.service, tt.k, got, tt.name)
		}
		if got := devrun.InstancePort(tt.port, tt.k); got != tt.wantPort {
			t.Errorf("InstancePort(%d, %d) = %d, want %d", tt.port, tt.k, got, tt.wantPort)
		}
	}
}

// No instance of the suite's consumers, up to MaxInstances, lands on a
// port of a service, the control API or the broker; a layout where one
// would is reported.
func TestCheckInstancePorts(t *testing.T) {
	tests := []struct {
		name     string
		services []suite.Service
		other    []int
		wantErr  string
	}{
		{name: "the suite", services: suite.Services(), other: []int{8090, 9092}},
		{
			name: "an instance on another service's port",
			services: []suite.Service{
				{Name: "a", Port: 8000, ConsumerGroup: "a-group"},
				{Name: "b", Port: 8200},
			},
			wantErr: "a#3 would listen on 8200, which is b-service's",
		},
		{
			name:     "an instance on the control API",
			services: []suite.Service{{Name: "a", Port: 8000, ConsumerGroup: "a-group"}},
			other:    []int{8500},
			wantErr:  "a#6 would listen on 8500, which is the runner's",
		},
		{
			name: "two consumers' instances on one port",
			services: []suite.Service{
				{Name: "a", Port: 8000, ConsumerGroup: "a-group"},
				{Name: "b", Port: 8100, ConsumerGroup: "b-group"},
			},
			wantErr: "a#2 would listen on 8100, which is b-service's",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := devrun.CheckInstancePorts(tt.services, tt.other...)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("CheckInstancePorts: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("CheckInstancePorts = %v, want an error with %q", err, tt.wantErr)
			}
		})
	}
}

// alive reports whether a process with this pid exists.
func alive(pid int) bool { return pid > 0 && syscall.Kill(pid, 0) == nil }

// instances lists the control API's processes of service by name.
func instances(t *testing.T, control, service string) map[string]map[string]any {
	t.Helper()
	code, list := call(t, "GET", control+"/services", "")
	if code != 200 {
		t.Fatalf("GET /services: %d %v", code, list)
	}
	out := map[string]map[string]any{}
	all, _ := list["services"].([]any)
	for _, x := range all {
		v, _ := x.(map[string]any)
		if v["service"] == service {
			out[fmt.Sprint(v["name"])] = v
		}
	}
	return out
}

// The control API scales a consumer out to more processes in its group,
// each on its own port with the service's environment, lists them with
// their URL and pid, and scales them in again; an extra instance stopped
// by a scale-down, or ended by a fail point, does not stop the suite.
func TestScaleAPI(t *testing.T) {
	url := databaseURL(t)
	alphaDB, betaDB := uniqueName("alpha"), uniqueName("beta")
	dropAfter(t, url, alphaDB, betaDB)
	cfg := devrun.Config{
		DatabaseURL: url,
		DataDir:     t.TempDir(),
		Dir:         fakeRepo(t, "alpha", "beta"),
		BinDir:      "bin",
		BrokerAddr:  "127.0.0.1:0",
		Services: []suite.Service{
			{Name: "alpha", Port: freePort(t), DBName: alphaDB, ConsumerGroup: "alpha-service"},
			{Name: "beta", Port: freePort(t), DBName: betaDB},
		},
		ReadyTimeout: time.Minute,
		GracePeriod:  10 * time.Second,
		Environ:      append(os.Environ(), "FAKE_PID_DIR="+t.TempDir()),
		ControlAddr:  fmt.Sprintf("127.0.0.1:%d", freePort(t)),
	}
	control := "http://" + cfg.ControlAddr
	base := cfg.Services[0].Port

	out := &buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- devrun.Run(ctx, cfg, out) }()
	poll.Until(t, 2*time.Minute, "the control API", func() bool { return strings.Contains(out.String(), "control API on "+control) })
	running := func() {
		t.Helper()
		select {
		case err := <-done:
			t.Fatalf("the runner stopped: %v\n%s", err, out.String())
		default:
		}
	}

	var pids []int
	t.Run("scale out to 3", func(t *testing.T) {
		code, v := call(t, "POST", control+"/services/alpha/scale", `{"instances":3}`)
		if list, _ := v["instances"].([]any); code != 200 || len(list) != 3 {
			t.Fatalf("scale: %d %v", code, v)
		}
		got := instances(t, control, "alpha")
		for k, name := range []string{"alpha", "alpha#2", "alpha#3"} {
			v, ok := got[name]
			wantURL := fmt.Sprintf("http://127.0.0.1:%d", devrun.InstancePort(base, k+1))
			pid, _ := v["pid"].(float64)
			if !ok || v["state"] != "running" || v["url"] != wantURL || v["instance"] != float64(k+1) || !alive(int(pid)) {
				t.Fatalf("%s: %v, want running at %s with a live pid", name, v, wantURL)
			}
			if code, _ := call(t, "GET", wantURL+"/readyz", ""); code != 200 {
				t.Errorf("%s does not answer /readyz: %d", name, code)
			}
			pids = append(pids, int(pid))
		}
		for k := 2; k <= 3; k++ {
			want := fmt.Sprintf("alpha#%d | db=%s group=alpha-service http=127.0.0.1:%d\n", k, alphaDB, devrun.InstancePort(base, k))
			if !strings.Contains(out.String(), want) {
				t.Errorf("no line %q in the output:\n%s", want, out.String())
			}
		}
		if code, v := call(t, "GET", control+"/services/alpha%232", ""); code != 200 || v["state"] != "running" {
			t.Errorf("GET /services/alpha#2: %d %v", code, v)
		}
		running()
	})

	t.Run("a fail point's exit of an instance keeps the suite running", func(t *testing.T) {
		url := fmt.Sprintf("http://127.0.0.1:%d", devrun.InstancePort(base, 3))
		if code, _ := call(t, "GET", url+"/exit?code=137", ""); code != 200 {
			t.Fatalf("asking alpha#3 to exit: %d", code)
		}
		poll.Until(t, 20*time.Second, "alpha#3 to exit", func() bool { return instances(t, control, "alpha")["alpha#3"]["state"] == "exited" })
		running()
		// Scaling again starts it anew.
		if code, v := call(t, "POST", control+"/services/alpha/scale", `{"instances":3}`); code != 200 {
			t.Fatalf("scale: %d %v", code, v)
		}
		v := instances(t, control, "alpha")["alpha#3"]
		pid, _ := v["pid"].(float64)
		if v["state"] != "running" || !alive(int(pid)) || int(pid) == pids[2] {
			t.Fatalf("alpha#3 after scaling again: %v", v)
		}
		pids[2] = int(pid)
	})

	t.Run("scale in to 1", func(t *testing.T) {
		code, v := call(t, "POST", control+"/services/alpha/scale", `{"instances":1}`)
		if list, _ := v["instances"].([]any); code != 200 || len(list) != 1 {
			t.Fatalf("scale: %d %v", code, v)
		}
		for _, pid := range pids[1:] {
			if alive(pid) {
				t.Errorf("process %d of a stopped instance still exists", pid)
			}
		}
		if !alive(pids[0]) {
			t.Error("scaling in stopped the service's own process")
		}
		for _, name := range []string{"alpha#2", "alpha#3"} {
			if !strings.Contains(out.String(), name+" | graceful stop") {
				t.Errorf("%s was not stopped gracefully:\n%s", name, out.String())
			}
		}
		if got := instances(t, control, "alpha"); len(got) != 1 {
			t.Errorf("instances after scaling in: %v", got)
		}
		running()
	})

	t.Run("request errors", func(t *testing.T) {
		tests := []struct {
			path, body string
			want       int
		}{
			{"/services/nope/scale", `{"instances":2}`, http.StatusNotFound},
			{"/services/beta/scale", `{"instances":2}`, http.StatusBadRequest},
			{"/services/alpha/scale", `{"instances":0}`, http.StatusBadRequest},
			{"/services/alpha/scale", fmt.Sprintf(`{"instances":%d}`, devrun.MaxInstances+1), http.StatusBadRequest},
			{"/services/alpha/scale", `{"replicas":2}`, http.StatusBadRequest},
			{"/services/alpha/scale", ``, http.StatusBadRequest},
		}
		for _, tt := range tests {
			if code, v := call(t, "POST", control+tt.path, tt.body); code != tt.want || v["error"] == nil {
				t.Errorf("POST %s %s: %d %v, want %d with an error", tt.path, tt.body, code, v, tt.want)
			}
		}
		running()
	})

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run() = %v after cancel", err)
	}
}
