package httpapi

import "net/http"

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
