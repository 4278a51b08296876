package outbox

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/event"
	"github.com/reliable-orders/fulfillment/pkg/tracing"
)

// HTTPSink POSTs each row's payload, signed with a timestamp
// (event.SignCallback), to one URL; a 2xx answer is
// the acknowledgement. The rows of one aggregate are posted one at a time,
// in order, and the first failure stops that aggregate's rows so no later
// one overtakes it; different aggregates are posted in parallel, since a
// callback's round trip, not the relay, would otherwise bound the rate.
type HTTPSink struct {
	client   *http.Client
	url      string
	secret   []byte
	parallel int
}

// DefaultHTTPSinkParallel is how many aggregates' callbacks are in flight at
// once.
const DefaultHTTPSinkParallel = 32

// NewHTTPSink returns a sink posting to url with bodies signed by secret,
// DefaultHTTPSinkParallel aggregates at a time. The client's transport
// should keep that many idle connections to the host
// (httpapi.ClientTransport).
func NewHTTPSink(client *http.Client, url string, secret []byte) *HTTPSink {
	return &HTTPSink{client: client, url: url, secret: secret, parallel: DefaultHTTPSinkParallel}
}

// Send posts msgs, each aggregate's in order, and returns how many from the
// start were delivered: a failed row and everything after it in msgs is
// retried by the relay (rows of other aggregates after it that did go
// through are posted again, which the receiver deduplicates by event id).
func (s *HTTPSink) Send(ctx context.Context, msgs []Message) (int, error) {
	var order []string
	byAggregate := map[string][]int{}
	for i, m := range msgs {
		if _, ok := byAggregate[m.AggregateID]; !ok {
			order = append(order, m.AggregateID)
		}
		byAggregate[m.AggregateID] = append(byAggregate[m.AggregateID], i)
	}
	errs := make([]error, len(msgs))
	delivered := make([]bool, len(msgs))
	var g errgroup.Group
	g.SetLimit(s.parallel)
	for _, agg := range order {
		g.Go(func() error {
			for _, i := range byAggregate[agg] {
				if errs[i] = s.post(ctx, msgs[i]); errs[i] != nil {
					return nil // the aggregate's later rows wait for this one
				}
				delivered[i] = true
			}
			return nil
		})
	}
	_ = g.Wait() // the goroutines report through errs
	for i := range msgs {
		if !delivered[i] {
			if errs[i] != nil {
				return i, errs[i]
			}
			return i, fmt.Errorf("callback %s: not sent: an earlier callback of %s failed", msgs[i].EventID, msgs[i].AggregateID)
		}
	}
	return len(msgs), nil
}

func (s *HTTPSink) post(ctx context.Context, m Message) error {
	// The request continues the row's trace (the relay's send span): a
	// traced client transport sends its traceparent.
	req, err := http.NewRequestWithContext(tracing.Extract(ctx, m.Headers), http.MethodPost, s.url, bytes.NewReader(m.Payload))
	if err != nil {
		return fmt.Errorf("callback request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	// Signed at each attempt, so a re-delivery after a long outage is
	// still inside the receiver's replay window.
	for k, v := range event.CallbackHeaders(s.secret, time.Now(), m.Payload) {
		req.Header.Set(k, v)
	}
	for k, v := range m.Headers {
		req.Header.Set("X-"+k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("callback %s: %w", m.EventID, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("callback %s: %s: %s", m.EventID, resp.Status, bytes.TrimSpace(body))
	}
	return nil
}
