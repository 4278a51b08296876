package consumer

import (
	"errors"
	"fmt"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// A dead letter's failureReason leads with the reason code and says it
// once, whichever error classified the failure and whatever wraps it.
func TestFailureReasonSaysItsCodeOnce(t *testing.T) {
	d := deadLetterer{cfg: Config{Consumer: "c", Topic: "t"}}
	tests := []struct {
		name  string
		cause error
		want  string
	}{
		{"an invalid event", &event.InvalidError{Reason: event.ReasonSchemaViolation, Err: errors.New(`at /data: missing property "paymentId"`)},
			`SCHEMA_VIOLATION: at /data: missing property "paymentId"`},
		{"marked permanent", PermanentError("INVALID_ITEMS", errors.New("no items")), "INVALID_ITEMS: no items"},
		{"marked permanent, then wrapped", fmt.Errorf("apply batch: %w", PermanentError("INVALID_AMOUNT", errors.New("-1.00"))),
			"INVALID_AMOUNT: apply batch: -1.00"},
		{"anything else", errors.New("connection reset"), "HANDLER_ERROR: connection reset"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			class, reason := Classify(tt.cause)
			if got := d.record(class, reason, tt.cause).FailureReason; got != tt.want {
				t.Errorf("failureReason %q, want %q", got, tt.want)
			}
		})
	}
}
