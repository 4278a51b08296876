package consumer

import (
	"errors"
	"strings"

	"github.com/reliable-orders/fulfillment/pkg/event"
)

// Class is how a failure is handled.
type Class string

// The error classes (docs/design.md, Error classes).
const (
	// Retryable failures (timeouts, lost connections, deadlocks) are retried
	// with backoff up to the bound, then dead-lettered.
	Retryable Class = "RETRYABLE"
	// Permanent failures (invalid JSON, schema violations, unknown versions)
	// are dead-lettered at once.
	Permanent Class = "PERMANENT"
	// BusinessRejection is a recorded business outcome (insufficient stock, a
	// refund above the payment): acknowledged, never retried.
	BusinessRejection Class = "BUSINESS_REJECTION"
)

// ClassifiedError carries a failure's class and a short reason code.
type ClassifiedError struct {
	Class  Class
	Reason string
	Err    error
}

func (e *ClassifiedError) Error() string {
	return string(e.Class) + " " + e.Reason + ": " + e.Err.Error()
}

func (e *ClassifiedError) Unwrap() error { return e.Err }

// PermanentError marks err as not worth retrying.
func PermanentError(reason string, err error) error {
	return &ClassifiedError{Class: Permanent, Reason: reason, Err: err}
}

// Rejection marks err as a business rejection the handler has recorded.
func Rejection(reason string, err error) error {
	return &ClassifiedError{Class: BusinessRejection, Reason: reason, Err: err}
}

// Classify returns the class and reason of err. Invalid events are
// permanent; anything unclassified is retryable, bounded by the retry limit.
func Classify(err error) (Class, string) {
	var ce *ClassifiedError
	if errors.As(err, &ce) {
		return ce.Class, ce.Reason
	}
	var inv *event.InvalidError
	if errors.As(err, &inv) {
		return Permanent, inv.Reason
	}
	return Retryable, "HANDLER_ERROR"
}

// unlabelled is err's message without the label of the error that
// classified it (a ClassifiedError's "PERMANENT INVALID_ITEMS: ", an
// event.InvalidError's "SCHEMA_VIOLATION: "), keeping whatever wraps it:
// a dead letter's failureReason leads with the reason code and says it
// once.
func unlabelled(err error) string {
	msg := err.Error()
	var ce *ClassifiedError
	var inv *event.InvalidError
	switch {
	case errors.As(err, &ce):
		return strings.Replace(msg, strings.TrimSuffix(ce.Error(), ce.Err.Error()), "", 1)
	case errors.As(err, &inv):
		return strings.Replace(msg, strings.TrimSuffix(inv.Error(), inv.Err.Error()), "", 1)
	}
	return msg
}
