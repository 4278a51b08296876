package devrun_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/devrun"
	"github.com/reliable-orders/fulfillment/scripts/internal/supervise"
)

// readyAfter answers 503 n times, then 200.
func readyAfter(t *testing.T, n int32) string {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) <= n {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/readyz"
}

// closedURL is an address nobody listens on.
func closedURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/readyz"
}

func TestWaitReady(t *testing.T) {
	tests := []struct {
		name      string
		endpoints func(t *testing.T) []devrun.Endpoint
		exit      *supervise.Exit
		wantErr   []string // substrings; none means success
	}{
		{"all ready at once", func(t *testing.T) []devrun.Endpoint {
			return []devrun.Endpoint{{"a", readyAfter(t, 0)}, {"b", readyAfter(t, 0)}}
		}, nil, nil},
		{"ready after a few 503s", func(t *testing.T) []devrun.Endpoint {
			return []devrun.Endpoint{{"a", readyAfter(t, 3)}, {"b", readyAfter(t, 1)}}
		}, nil, nil},
		{"one never ready", func(t *testing.T) []devrun.Endpoint {
			return []devrun.Endpoint{{"a", readyAfter(t, 0)}, {"slow", readyAfter(t, 1<<30)}}
		}, nil, []string{"slow not ready after", "503"}},
		{"one not listening", func(t *testing.T) []devrun.Endpoint {
			return []devrun.Endpoint{{"gone", closedURL(t)}}
		}, nil, []string{"gone not ready after", "not listening"}},
		{"one exits while waiting", func(t *testing.T) []devrun.Endpoint {
			return []devrun.Endpoint{{"crashy", closedURL(t)}}
		}, &supervise.Exit{Name: "crashy", Err: errors.New("exit status 2")}, []string{"crashy exited before it was ready", "exit status 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exits := make(chan supervise.Exit, 1)
			if tt.exit != nil {
				exits <- *tt.exit
			}
			var progress strings.Builder
			err := devrun.WaitReady(context.Background(), http.DefaultClient, tt.endpoints(t), 2*time.Second, exits, &progress)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("WaitReady() = %v", err)
				}
				if got := strings.Count(progress.String(), "is ready"); got != 2 {
					t.Errorf("progress reports %d ready, want 2:\n%s", got, progress.String())
				}
				return
			}
			if err == nil {
				t.Fatal("WaitReady() succeeded")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

func TestWaitReadyStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := devrun.WaitReady(ctx, http.DefaultClient, []devrun.Endpoint{{"a", closedURL(t)}}, time.Minute, nil, io.Discard)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitReady() = %v, want context.Canceled", err)
	}
}
