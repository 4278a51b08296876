package devrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/reliable-orders/fulfillment/pkg/broker"
	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// Errors of the broker part of the control API.
var (
	// ErrExternalBroker refuses broker control when the suite runs against
	// KAFKA_BROKERS: the runner only owns its embedded broker.
	ErrExternalBroker = errors.New("the suite uses the brokers of KAFKA_BROKERS: the runner can stop, start and fault only its embedded broker")
	// ErrBrokerStopped refuses a fault while the broker is stopped.
	ErrBrokerStopped = errors.New("the embedded broker is stopped (POST /broker/start)")
)

// brokerControl owns the embedded broker so the control API can take it
// away (an outage drill) and bring it back on the same address with the
// same data directory, and arm protocol faults on it.
type brokerControl struct {
	cfg broker.Config // Addr is the address it actually listens on
	log *prefixed

	mu     sync.Mutex
	b      *broker.Broker // nil while stopped
	stops  int
	fault  *kfake.FaultHandle
	armed  controlapi.FaultRequest
	closed bool
}

// startBrokerControl starts the embedded broker on addr with its data in
// dataDir/broker (StartBroker).
func startBrokerControl(addr, dataDir string, log *prefixed) (*brokerControl, error) {
	b, err := StartBroker(addr, dataDir)
	if err != nil {
		return nil, err
	}
	cfg := brokerConfig(addr, dataDir)
	// A restart comes back where clients look for it, also when addr asked
	// for any free port.
	cfg.Addr = b.Addrs()[0]
	return &brokerControl{cfg: cfg, log: log, b: b}, nil
}

// Addrs are the bootstrap addresses of the broker.
func (bc *brokerControl) Addrs() []string { return []string{bc.cfg.Addr} }

// close stops the broker for good, when the runner ends.
func (bc *brokerControl) close() {
	bc.mu.Lock()
	defer bc.mu.Unlock()
	bc.closed = true
	if bc.b != nil {
		bc.b.Close()
		bc.b = nil
	}
}

func (bc *brokerControl) viewLocked() controlapi.BrokerView {
	v := controlapi.BrokerView{Embedded: true, State: "running", Addr: bc.cfg.Addr, DataDir: bc.cfg.DataDir, Stops: bc.stops}
	if bc.b == nil {
		v.State = "stopped"
	}
	if bc.fault != nil {
		v.Fault = &controlapi.FaultView{FaultRequest: bc.armed, Error: kerr.RequestTimedOut.Message, Hits: bc.fault.Hits()}
	}
	return v
}

// brokerOps is what the /broker routes drive: make run's embedded broker
// (brokerControl) or the compose project's (ComposeControl).
type brokerOps interface {
	brokerState(ctx context.Context) controlapi.BrokerView
	setBroker(ctx context.Context, start bool) (controlapi.BrokerView, error)
	armFault(ctx context.Context, req controlapi.FaultRequest) (controlapi.BrokerView, error)
	clearFault(ctx context.Context) (controlapi.BrokerView, error)
}

// brokerState is the broker's view; without an embedded broker (bc nil)
// it says so.
func (bc *brokerControl) brokerState(context.Context) controlapi.BrokerView {
	if bc == nil {
		return controlapi.BrokerView{Embedded: false, Error: ErrExternalBroker.Error()}
	}
	bc.mu.Lock()
	defer bc.mu.Unlock()
	return bc.viewLocked()
}

// setBroker closes the broker, keeping its data, or brings it back on its
// address with its data; stopping a stopped or starting a running broker
// does nothing.
func (bc *brokerControl) setBroker(_ context.Context, start bool) (controlapi.BrokerView, error) {
	if bc == nil {
		return controlapi.BrokerView{}, ErrExternalBroker
	}
	bc.mu.Lock()
	defer bc.mu.Unlock()
	switch {
	case !start && bc.b != nil && !bc.closed:
		bc.b.Close()
		bc.b, bc.fault = nil, nil
		bc.stops++
		bc.log.Printf("embedded broker on %s stopped by the control API (data kept in %s); POST /broker/start brings it back", bc.cfg.Addr, bc.cfg.DataDir)
	case start && bc.closed:
		return bc.viewLocked(), fmt.Errorf("the runner is stopping: %w", ErrBrokerStopped)
	case start && bc.b == nil:
		b, err := broker.Start(bc.cfg)
		if err != nil {
			return bc.viewLocked(), fmt.Errorf("restart the embedded broker on %s: %w", bc.cfg.Addr, err)
		}
		bc.b = b
		bc.log.Printf("embedded broker started again on %s by the control API", bc.cfg.Addr)
	}
	return bc.viewLocked(), nil
}

// armFault installs req, replacing the fault armed before.
func (bc *brokerControl) armFault(_ context.Context, req controlapi.FaultRequest) (controlapi.BrokerView, error) {
	if bc == nil {
		return controlapi.BrokerView{}, ErrExternalBroker
	}
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if bc.b == nil {
		return bc.viewLocked(), ErrBrokerStopped
	}
	if bc.fault != nil {
		bc.fault.Remove()
	}
	// REQUEST_TIMED_OUT on a produce is answered after the append (kfake's
	// fault semantics): every try of the producer, its own retries
	// included, lands on the log and reports failure.
	bc.fault = bc.b.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: req.Topic, Err: kerr.RequestTimedOut, Count: req.Count})
	bc.armed = req
	bc.log.Printf("broker fault armed by the control API: the next %d Produce requests to %s are answered %s after the append",
		req.Count, req.Topic, kerr.RequestTimedOut.Message)
	return bc.viewLocked(), nil
}

// clearFault removes the armed fault, used up or not.
func (bc *brokerControl) clearFault(context.Context) (controlapi.BrokerView, error) {
	if bc == nil {
		return controlapi.BrokerView{}, ErrExternalBroker
	}
	bc.mu.Lock()
	defer bc.mu.Unlock()
	if bc.fault != nil {
		bc.fault.Remove()
		bc.fault = nil
	}
	return bc.viewLocked(), nil
}

// brokerRoutes adds the /broker routes of the control API over b. A broker
// the backend does not own or cannot fault (ErrExternalBroker,
// ErrBrokerStopped, ErrNoComposeFault) is refused with 409, which the
// drills report as SKIP.
func brokerRoutes(mux *http.ServeMux, b brokerOps) {
	mux.HandleFunc("GET /broker", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, b.brokerState(r.Context()))
	})
	route := func(pattern string, do func(*http.Request) (controlapi.BrokerView, error)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			// A failure answers the broker's state with it, but for a
			// request that could not be read.
			v, err := do(r)
			if err == nil || errors.Is(err, errBadFault) {
				answer(w, v, err)
				return
			}
			v.Error = err.Error()
			writeJSON(w, statusOf(err), v)
		})
	}
	route("POST /broker/stop", func(r *http.Request) (controlapi.BrokerView, error) { return b.setBroker(r.Context(), false) })
	route("POST /broker/start", func(r *http.Request) (controlapi.BrokerView, error) { return b.setBroker(r.Context(), true) })
	route("DELETE /broker/faults", func(r *http.Request) (controlapi.BrokerView, error) { return b.clearFault(r.Context()) })
	route("POST /broker/faults", func(r *http.Request) (controlapi.BrokerView, error) {
		req, err := decodeFault(r)
		if err != nil {
			return controlapi.BrokerView{}, err
		}
		return b.armFault(r.Context(), req)
	})
}

// errBadFault is a POST /broker/faults body the API cannot arm.
var errBadFault = errors.New(`body: want {"type":"lost-ack","count":N,"topic":"..."}`)

func decodeFault(r *http.Request) (controlapi.FaultRequest, error) {
	req := controlapi.FaultRequest{}
	if err := decodeBody(r, &req, true); err != nil {
		return req, fmt.Errorf("%w: %w", errBadFault, err)
	}
	req.Type, req.Count, req.Topic = cmp.Or(req.Type, controlapi.FaultLostAck), cmp.Or(req.Count, 1), cmp.Or(req.Topic, suite.OrderEventsTopic)
	switch {
	case req.Type != controlapi.FaultLostAck:
		return req, fmt.Errorf("%w: unknown type %q (only %q)", errBadFault, req.Type, controlapi.FaultLostAck)
	case req.Count < 1 || req.Count > 1000:
		return req, fmt.Errorf("%w: count %d: want 1..1000", errBadFault, req.Count)
	}
	return req, nil
}
