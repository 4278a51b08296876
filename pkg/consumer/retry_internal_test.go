package consumer

import (
	"errors"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
)

// The waits between attempts follow the configured backoff: doubling from
// the initial interval with ±50 % jitter, so between half and one and a
// half times 1+2+4 intervals for four attempts (Watermill's own middleware
// waited about four-fold more per step).
func TestRetryBackoffFollowsTheConfiguration(t *testing.T) {
	const initial = 40 * time.Millisecond
	cfg := RetryConfig{MaxAttempts: 4, InitialInterval: initial, MaxInterval: time.Second}
	tests := []struct {
		name     string
		err      error
		attempts int
	}{
		{"retryable: the bound", errors.New("connection reset"), 4},
		{"permanent: once", PermanentError("SCHEMA_VIOLATION", errors.New("bad")), 1},
		{"business rejection: once", Rejection("INSUFFICIENT_STOCK", errors.New("short")), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs := 0
			h := retry(cfg)(func(*message.Message) ([]*message.Message, error) {
				runs++
				return nil, tt.err
			})
			start := time.Now()
			if _, err := h(message.NewMessage("1", nil)); !errors.Is(err, tt.err) {
				t.Fatalf("error %v, want the handler's", err)
			}
			took := time.Since(start)
			if runs != tt.attempts {
				t.Fatalf("%d runs, want %d", runs, tt.attempts)
			}
			if tt.attempts == 4 {
				least, most := 7*initial/2, 3*7*initial/2
				if took < least || took > most+time.Second {
					t.Fatalf("4 attempts took %v, want the configured backoff: between %v and %v", took, least, most)
				}
			}
		})
	}
}
