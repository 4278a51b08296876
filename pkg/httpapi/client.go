package httpapi

import (
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"

	"github.com/reliable-orders/fulfillment/pkg/tracing"
)

// ClientTransport is the transport of a client that sends up to parallel
// requests at once to each host it talks to: Go's default keeps only two
// idle connections per host, so under load every further request would
// open and close a connection of its own.
func ClientTransport(parallel int) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = max(tr.MaxIdleConns, 4*parallel)
	tr.MaxIdleConnsPerHost = parallel
	return tr
}

// TracedTransport propagates the trace of each request's context to the
// server it calls (its traceparent header), recording a client span, on
// the tracer provider of the span the request's context carries: a call
// made outside any trace records nothing and sends no traceparent.
func TracedTransport(base http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(base, otelhttp.WithPropagators(tracing.Propagator()),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method + " " + r.URL.Path }))
}
