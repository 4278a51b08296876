package consumer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/services/payment/internal/consumer"
)

func TestSuperviseRestartsUntilContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	restart := consumer.Restart{Initial: time.Millisecond, Max: 2 * time.Millisecond, Healthy: time.Minute}
	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- consumer.Supervise(ctx, logger, restart, func(ctx context.Context) error {
			calls++
			if calls < 3 {
				return errors.New("broker down")
			}
			cancel()
			<-ctx.Done()
			return nil
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Supervise = %v, want nil after the context ended", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Supervise did not return after the context ended")
	}
	if calls != 3 {
		t.Fatalf("run called %d times, want 3", calls)
	}
}
