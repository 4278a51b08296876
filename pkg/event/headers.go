package event

import "strconv"

// Header names every message on the wire carries besides its payload, so a
// broker key, a DLQ record or a callback names its event without parsing
// the payload. The outbox writes them, the consumers and the dead letterer
// read them.
const (
	HeaderEventID      = "eventId"
	HeaderEventType    = "eventType"
	HeaderEventVersion = "eventVersion"
	HeaderAggregateID  = "aggregateId"
	HeaderTraceparent  = "traceparent"
)

// Headers returns the headers of e's message.
func (e Envelope) Headers() map[string]string {
	return map[string]string{
		HeaderEventID:      e.EventID,
		HeaderEventType:    string(e.EventType),
		HeaderEventVersion: strconv.Itoa(e.EventVersion),
		HeaderAggregateID:  e.AggregateID,
		HeaderTraceparent:  e.Traceparent(),
	}
}
