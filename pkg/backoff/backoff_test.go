package backoff_test

import (
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/backoff"
)

func TestJitteredGrowsAndIsCapped(t *testing.T) {
	tests := []struct {
		failures int
		want     time.Duration
	}{
		{1, time.Second},
		{2, 2 * time.Second},
		{3, 4 * time.Second},
		{10, 30 * time.Second},
	}
	for _, tt := range tests {
		for range 100 {
			got := backoff.Jittered(tt.failures, time.Second, 30*time.Second)
			if got < tt.want/2 || got >= tt.want*3/2 {
				t.Fatalf("Jittered(%d) = %v, want %v ±50%%", tt.failures, got, tt.want)
			}
		}
	}
}
