package app_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/services/console/internal/app"
)

// fakeLag answers a growing lag; notification is down.
type fakeLag struct{ calls atomic.Int64 }

func (f *fakeLag) Lag(_ context.Context, svc string) (suiteapi.LagReport, error) {
	n := f.calls.Add(1)
	if svc == "notification" {
		return suiteapi.LagReport{}, errDown
	}
	return suiteapi.LagReport{TotalLag: n, OldestAgeSeconds: 1.5, ConsumedPerSecond: 40}, nil
}

func TestMonitorKeepsTheLastSamplesOfEveryConsumer(t *testing.T) {
	f := &fakeLag{}
	m := app.NewMonitor(app.MonitorConfig{Interval: 5 * time.Millisecond, History: 3, Idle: time.Hour}, f)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	if s := m.Watch(); len(s) != len(app.Consumers) || len(s[0].Samples) != 0 {
		t.Fatalf("before any sample: %+v", s)
	}
	// More samples than the history holds.
	poll.Until(t, 10*time.Second, "a dozen rounds of samples", func() bool { return f.calls.Load() >= 12*int64(len(app.Consumers)) })
	for _, s := range m.Watch() {
		if len(s.Samples) != 3 {
			t.Errorf("%s: %d samples, want the last 3", s.Service, len(s.Samples))
			continue
		}
		for i, smp := range s.Samples {
			if i > 0 && smp.At.Before(s.Samples[i-1].At) {
				t.Errorf("%s: samples out of order", s.Service)
			}
			if s.Service == "notification" && smp.Error != errDown.Error() {
				t.Errorf("notification's sample %+v, want its error", smp)
			}
			if s.Service != "notification" && (smp.Error != "" || smp.ConsumedPerSecond != 40 || smp.TotalLag == 0) {
				t.Errorf("%s sample %+v", s.Service, smp)
			}
		}
	}
}
