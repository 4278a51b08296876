package faultproxy_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/internal/faultproxy"
	"github.com/reliable-orders/fulfillment/scripts/internal/faultproxy/faultproxytest"
)

const (
	topic = "order-events"
	other = "order-events.dlq"
)

// producer is a franz-go client that reaches the broker only through the
// proxy, as a broker advertising the proxy's address sends it there: kfake
// advertises its own address, so the dialer stands in for that listener.
func producer(t *testing.T, p *faultproxy.Proxy, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	var d net.Dialer
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(p.Addr()),
		kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, p.Addr())
		}),
		// Without idempotence the broker keeps every copy a retry
		// writes, as it keeps the relay's re-sends.
		kgo.DisableIdempotentWrite(),
		kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }),
		// A broken connection makes the client refresh its metadata
		// before it retries; the default minimum age holds that back
		// for seconds.
		kgo.MetadataMinAge(10 * time.Millisecond),
		kgo.ConsumeTopics(topic, other),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// produce writes one record per value, one at a time, each acknowledged
// before the next is sent.
func produce(t *testing.T, cl *kgo.Client, topic string, values ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s to %s: %v", v, topic, err)
		}
	}
}

// copies reads both topics from the start until want records have come
// and counts each value per topic.
func copies(t *testing.T, cl *kgo.Client, want int) map[string]map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := map[string]map[string]int{topic: {}, other: {}}
	for n := 0; n < want; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", n, want, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Topic][string(r.Value)]++
			n++
		})
	}
	return got
}

func TestProxy(t *testing.T) {
	tests := []struct {
		name string
		// versions caps the client's versions: Produce before v13 names
		// topics, from v13 it gives their ids.
		versions *kversion.Versions
	}{
		{"topics by name (Produce v12)", kversion.V4_0_0()},
		{"topics by id (the newest Produce kfake serves)", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := faultproxytest.Start(t, 4, topic, other)
			var opts []kgo.Opt
			if tt.versions != nil {
				opts = append(opts, kgo.MaxVersions(tt.versions))
			}
			cl := producer(t, p, opts...)

			// Unarmed it is transparent: each record once.
			produce(t, cl, topic, "a", "b")
			produce(t, cl, other, "c")

			// Armed for 3 on topic: the first record's request and
			// its next two retries reach the broker and lose their
			// answer; the fourth try is answered.
			const n = 3
			p.Arm(topic, n)
			// Another topic's requests pass.
			produce(t, cl, other, "d")
			produce(t, cl, topic, "e")
			// Used up: the next record is written once.
			produce(t, cl, topic, "f")

			f, ok := p.Fault()
			if !ok || f.Hits != n || f.Taken != n {
				t.Errorf("fault %+v, armed %v; want %d taken and %d hits", f, ok, n, n)
			}
			got := copies(t, cl, 2+2+(n+1)+1)
			want := map[string]map[string]int{
				topic: {"a": 1, "b": 1, "e": n + 1, "f": 1},
				other: {"c": 1, "d": 1},
			}
			for tp, values := range want {
				for v, count := range values {
					if got[tp][v] != count {
						t.Errorf("%s holds %q %d time(s), want %d (all: %v)", tp, v, got[tp][v], count, got)
					}
				}
			}

			// Cleared, nothing is lost.
			p.Arm(topic, 5)
			p.Clear()
			produce(t, cl, topic, "g")
			if _, ok := p.Fault(); ok {
				t.Error("a fault is armed after Clear")
			}
			if got := copies(t, cl, 1); got[topic]["g"] != 1 {
				t.Errorf("after Clear: %v, want g once", got)
			}
		})
	}
}

// The admin API arms, reports and clears the fault; it refuses what it
// cannot arm.
func TestAdminAPI(t *testing.T) {
	p := faultproxytest.Start(t, 4, topic, other)
	srv := httptest.NewServer(p.Handler())
	defer srv.Close()
	api := controlapi.New(srv.URL, 5*time.Second)
	ctx := context.Background()

	var v faultproxy.View
	if err := api.Do(ctx, "GET", "/fault", nil, &v); err != nil || v.Fault != nil {
		t.Fatalf("GET /fault = %+v, %v; want no fault", v, err)
	}
	if err := api.Do(ctx, "POST", "/fault", faultproxy.ArmRequest{Topic: topic, Count: 2}, &v); err != nil {
		t.Fatal(err)
	}
	produce(t, producer(t, p), topic, "x")
	if err := api.Do(ctx, "GET", "/fault", nil, &v); err != nil || v.Fault == nil || v.Fault.Hits != 2 || v.Fault.Topic != topic {
		t.Errorf("GET /fault after a produce = %+v, %v; want 2 hits on %s", v.Fault, err, topic)
	}
	if err := api.Do(ctx, "DELETE", "/fault", nil, &v); err != nil || v.Fault != nil {
		t.Errorf("DELETE /fault = %+v, %v; want no fault", v, err)
	}

	for _, tt := range []struct {
		name, contentType, body string
	}{
		{"no topic", "application/json", `{"count":1}`},
		{"count 0", "application/json", `{"topic":"t","count":0}`},
		{"count too high", "application/json", `{"topic":"t","count":1001}`},
		{"unknown field", "application/json", `{"topic":"t","count":1,"type":"slow"}`},
		{"a form", "application/x-www-form-urlencoded", `topic=t&count=1`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.Post(srv.URL+"/fault", tt.contentType, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("status %d, want 400", resp.StatusCode)
			}
			if _, ok := p.Fault(); ok {
				t.Error("a refused request armed a fault")
			}
		})
	}
	var status *controlapi.StatusError
	if err := api.Do(ctx, "GET", "/healthz", nil, nil); errors.As(err, &status) {
		t.Errorf("GET /healthz: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  faultproxy.Config
		want string
	}{
		{"valid", faultproxy.Config{Listen: ":9092", Upstream: "redpanda:29092", DialTimeout: time.Second}, ""},
		{"no listen", faultproxy.Config{Upstream: "redpanda:29092", DialTimeout: time.Second}, "listen address"},
		{"no port", faultproxy.Config{Listen: ":9092", Upstream: "redpanda", DialTimeout: time.Second}, `upstream "redpanda"`},
		{"no timeout", faultproxy.Config{Listen: ":9092", Upstream: "redpanda:29092"}, "dial timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}
