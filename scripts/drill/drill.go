// Package drill replays the failure windows of the tutorial ("Tutorial 17:
// testing message queues and asynchronous tasks", its final exercise
// 完成一次订单事件可靠性演练) against a running suite and says, for each case,
// whether the suite kept its promise: PASS or FAIL, what was expected, what
// was seen, and how long the suite took to converge.
//
// A drill sees the suite only as a learner would: the HTTP API of
// README.md (API), with /admin/failpoints/{name}, /admin/outbox/{eventId},
// /orders/{id}/events and /metrics, and raw Kafka records published with
// franz-go, with the key and headers the outbox relay sets. Every id it
// creates starts with the run id, so drills can be run again and again
// against one long-lived suite. It writes the services' databases in two
// places only: the restored backups it plays (RestoreBackup, RestoreOrder),
// and the removal of the synthetic orders a case planted, once its verdict
// is taken (RemovePlanted), so a reconciliation run over all orders finds
// nothing. The crash drills also need a Controller to restart a service
// with a fail point armed: `make run` offers one over its control API
// (NewControlClient), `make compose-control` the same API for the compose
// suite, the test harness another.
//
// The same cases run in three places: `make drills` against `make run`,
// `go run ./scripts/drill/run` against any suite, and tests/drills in
// `make test` against the black-box harness.
package drill

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// The services, by the short names the URLs of a Target and a Controller use.
const (
	Order          = "order"
	Payment        = "payment"
	Inventory      = "inventory"
	Points         = "points"
	Notification   = "notification"
	Reconciliation = "reconciliation"
)

// Services lists the six services in start order.
func Services() []string {
	return []string{Order, Payment, Inventory, Points, Notification, Reconciliation}
}

// consumers are the services that turn OrderPaid into a side effect.
var consumers = []string{Inventory, Points, Notification}

// Controller restarts services for the crash drills. It is declared here,
// where it is used, with the methods of the control API's client: the
// client of `make run`'s control API (*controlapi.Client, NewControlClient)
// and the test harness each implement it.
type Controller interface {
	// Restart stops service if it runs, starts it again with env added to
	// its usual environment (nil: the usual environment) and returns once it
	// is ready.
	Restart(ctx context.Context, service string, env map[string]string) (controlapi.ServiceView, error)
	// Exit waits, up to timeout, until the service's process has ended, as
	// an armed fail point ends it, and returns its state with its exit
	// status.
	Exit(ctx context.Context, service string, timeout time.Duration) (controlapi.ServiceView, error)
}

// BrokerController is what the broker drills need beyond a Controller: to
// take the broker away and bring it back, and to lose its acknowledgements.
// It is optional — a Controller that lacks it, or answers
// ErrNoBrokerControl or 409 Conflict (a suite on brokers it does not own),
// skips those cases. `make run`'s control API and the test harness
// implement it.
type BrokerController interface {
	// StopBroker takes the broker away: every client sees connection
	// refused until StartBroker.
	StopBroker(ctx context.Context) (controlapi.BrokerView, error)
	// StartBroker brings it back on the same address with the same data.
	StartBroker(ctx context.Context) (controlapi.BrokerView, error)
	// ArmFault arms a lost-ack fault (controlapi.FaultLostAck): the next
	// Count Produce requests to Topic lose their acknowledgement after the
	// broker appends their records (the embedded broker answers
	// REQUEST_TIMED_OUT, the fault proxy under compose closes the
	// connection), replacing a fault armed before.
	ArmFault(ctx context.Context, req controlapi.FaultRequest) (controlapi.BrokerView, error)
	// Broker answers the armed fault with how many Produce requests it has
	// answered (Fault.Hits).
	Broker(ctx context.Context) (controlapi.BrokerView, error)
	// ClearFault removes the fault, used up or not.
	ClearFault(ctx context.Context) (controlapi.BrokerView, error)
}

// ServiceStopper is what the callback outage drill needs beyond a
// Controller: to stop a service and leave it down until Restart. It is
// optional, as BrokerController is.
type ServiceStopper interface {
	// Stop stops service gracefully; Controller.Restart starts it again.
	Stop(ctx context.Context, service string) (controlapi.ServiceView, error)
}

// ErrNoBrokerControl is a controller that cannot control the broker: the
// suite runs against brokers the runner does not own (KAFKA_BROKERS). The
// control API answers it as 409 Conflict.
var ErrNoBrokerControl = errors.New("no control of the broker")

// NewControlClient returns a client of the control API at baseURL
// ("http://127.0.0.1:8090") for a Target whose Timeout is timeout.
func NewControlClient(baseURL string, timeout time.Duration) *controlapi.Client {
	// A restart answers once the service is ready, a wait once it has
	// exited: both can take a while.
	return controlapi.New(baseURL, timeout+2*time.Minute)
}

// Target is the suite a drill runs against. Fields left zero take the
// defaults of `make run` (topics, callback secret, retry bound, timeout) or
// a fresh run id.
type Target struct {
	// URLs are the services' base URLs by short name (Order, Payment, ...).
	URLs map[string]string
	// Brokers are the Kafka bootstrap brokers.
	Brokers []string
	// Topic carries the order events (ORDER_EVENTS_TOPIC).
	Topic string
	// DLQTopic is where the consumers dead-letter (DLQ_TOPIC): a case
	// that checks a dead letter finds it there as well as in its
	// consumer's records.
	DLQTopic string
	// AdminToken is sent as a bearer token to /admin/* (ADMIN_TOKEN).
	AdminToken string
	// CallbackSecret signs payment callbacks (CALLBACK_SECRET).
	CallbackSecret string
	// RetryMaxAttempts is the consumers' retry bound (RETRY_MAX_ATTEMPTS);
	// 0 means the default, 5.
	RetryMaxAttempts int
	// RetryInitialInterval and RetryMaxInterval are the consumers' backoff
	// (RETRY_INITIAL_INTERVAL, RETRY_MAX_INTERVAL; 0: 1 s and 30 s). With
	// RetryMaxAttempts they bound how long a failing message may hold its
	// partition (RetryBound).
	RetryInitialInterval time.Duration
	RetryMaxInterval     time.Duration
	// ParkDeadline is how long the consumers keep an event parked for a
	// missing predecessor before they dead-letter it (PARK_DEADLINE; 0: the
	// default, 5 min). reorder/gap-deadline waits that long, so it runs
	// only when the deadline is at most MaxParkDeadline.
	ParkDeadline time.Duration
	// Controller restarts services; without one the crash drills are
	// skipped. The broker and outage drills also need it to be a
	// BrokerController or a ServiceStopper.
	Controller Controller
	// Outage is how long the outage drills keep the broker, or the order
	// service, away (0: 30 s, the tutorial's case). It must allow the
	// relays a few attempts: at least three backoff intervals.
	Outage time.Duration
	// RunID prefixes every order id and SKU the drills create.
	RunID string
	// Timeout bounds each wait for convergence.
	Timeout time.Duration
	// HTTPClient sends the API calls; nil uses a client with a 10 s timeout.
	HTTPClient *http.Client
	// Databases are the services' database URLs by short name, for
	// reconcile/lost-effect, which plays a restored backup of inventory's,
	// and reconcile/restore-from-backup, which backs up and restores the
	// order service's with pg_dump and pg_restore (the fault, never
	// reconciliation's repair). Without one that case is skipped. Every
	// case also uses them to remove the synthetic orders it planted once
	// its verdict is taken (docs/drills.md, What a drill may touch);
	// without them those orders' rows stay, and the result line says so.
	Databases map[string]string
	// KeepPlanted keeps the rows of the synthetic orders the cases plant,
	// for inspection: a reconciliation run over all orders then names
	// them (ORPHAN_EFFECT).
	KeepPlanted bool
}

// Defaults of a Target, those of `make run` (README.md (Configuration)).
const (
	DefaultTopic            = suite.OrderEventsTopic
	DefaultDLQTopic         = suite.DLQTopic
	DefaultCallbackSecret   = "dev-callback-secret"
	DefaultRetryMaxAttempts = 5
	DefaultRetryInitial     = time.Second
	DefaultRetryMax         = 30 * time.Second
	DefaultTimeout          = 60 * time.Second
	DefaultOutage           = 30 * time.Second
	DefaultParkDeadline     = 5 * time.Minute
	// MaxParkDeadline is the longest PARK_DEADLINE reorder/gap-deadline
	// waits out; with a longer one it is skipped.
	MaxParkDeadline = time.Minute
)

// LocalURLs are the services' URLs under `make run`.
func LocalURLs() map[string]string {
	out := map[string]string{}
	for _, s := range suite.Services() {
		out[s.Name] = s.LocalURL()
	}
	return out
}

// LocalDatabases are the URLs of the suite's databases on server, by
// service, named as `make run` and compose name them: the Databases of a
// Target.
func LocalDatabases(server string) (map[string]string, error) {
	out := map[string]string{}
	for _, svc := range suite.Services() {
		dsn, err := postgres.WithDatabase(server, svc.DBName)
		if err != nil {
			return nil, fmt.Errorf("database URL: %w", err)
		}
		out[svc.Name] = dsn
	}
	return out, nil
}

// NewRunID returns a run id no earlier run has used: the time in base 36.
func NewRunID() string { return strconv.FormatInt(time.Now().UnixMilli(), 36) }

// withDefaults fills in what the target leaves zero.
func (t Target) withDefaults() Target {
	t.Topic = cmp.Or(t.Topic, DefaultTopic)
	t.DLQTopic = cmp.Or(t.DLQTopic, DefaultDLQTopic)
	t.CallbackSecret = cmp.Or(t.CallbackSecret, DefaultCallbackSecret)
	t.RetryMaxAttempts = cmp.Or(t.RetryMaxAttempts, DefaultRetryMaxAttempts)
	t.RetryInitialInterval = cmp.Or(t.RetryInitialInterval, DefaultRetryInitial)
	t.RetryMaxInterval = cmp.Or(t.RetryMaxInterval, DefaultRetryMax)
	t.RunID = cmp.Or(t.RunID, NewRunID())
	t.Timeout = cmp.Or(t.Timeout, DefaultTimeout)
	t.Outage = cmp.Or(t.Outage, DefaultOutage)
	t.ParkDeadline = cmp.Or(t.ParkDeadline, DefaultParkDeadline)
	return t
}

// Validate reports every setting a drill cannot run with.
func (t Target) Validate() error {
	var errs []error
	for _, s := range Services() {
		if t.URLs[s] == "" {
			errs = append(errs, fmt.Errorf("no URL for the %s service", s))
		}
	}
	if len(t.Brokers) == 0 {
		errs = append(errs, errors.New("no Kafka brokers"))
	}
	if t.RetryMaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("retry max attempts %d: want at least 1 (0: the default)", t.RetryMaxAttempts))
	}
	if t.RetryInitialInterval < 0 || t.RetryMaxInterval < 0 || t.RetryMaxInterval != 0 && t.RetryMaxInterval < t.RetryInitialInterval {
		errs = append(errs, fmt.Errorf("retry intervals %s..%s: want 0 < initial <= max (0: the default)", t.RetryInitialInterval, t.RetryMaxInterval))
	}
	if t.Timeout < 0 {
		errs = append(errs, fmt.Errorf("negative timeout %s", t.Timeout))
	}
	if t.Outage < 0 {
		errs = append(errs, fmt.Errorf("negative outage %s", t.Outage))
	}
	if t.ParkDeadline < 0 {
		errs = append(errs, fmt.Errorf("negative park deadline %s", t.ParkDeadline))
	}
	return errors.Join(errs...)
}

// jitter is the consumers' backoff randomisation: each wait lies within
// ±50 % of its nominal interval (docs/design.md, Retry and backoff).
const jitter = 0.5

// RetryBound is the longest a message that fails every attempt may hold its
// partition before it is dead-lettered, as configured: the sum of the
// RetryMaxAttempts-1 waits, each its nominal exponential interval (doubling
// from RetryInitialInterval, capped at RetryMaxInterval) plus the jitter.
// Zero fields count as their defaults.
func (t Target) RetryBound() time.Duration {
	t = t.withDefaults()
	var bound time.Duration
	interval := t.RetryInitialInterval
	for range t.RetryMaxAttempts - 1 {
		bound += time.Duration(float64(interval) * (1 + jitter))
		interval = min(2*interval, t.RetryMaxInterval)
	}
	return bound
}

// Result is one case's verdict.
type Result struct {
	// Case names the case, "<drill>/<case>".
	Case string
	// Pass says the suite kept the case's promise.
	Pass bool
	// Skipped says the case could not run here (no Controller, or one
	// that cannot control the broker); it is not a failure.
	Skipped bool
	// Expected is the promise, in a line.
	Expected string
	// Seen is what the drill observed: the evidence of a pass, or the first
	// thing that broke the promise.
	Seen string
	// Convergence is how long the suite took, from the fault or the fix to
	// the converged state.
	Convergence time.Duration
}

// Verdict is PASS, FAIL or SKIP.
func (r Result) Verdict() string {
	switch {
	case r.Skipped:
		return "SKIP"
	case r.Pass:
		return "PASS"
	}
	return "FAIL"
}

// Case is one drill case: a function of the Target that returns a Result.
type Case struct {
	// Name is "<drill>/<case>".
	Name string
	// Drill is the group it belongs to: duplicate, loss, reorder, poison,
	// replay or reconcile.
	Drill string
	// Run runs the case against t.
	Run func(ctx context.Context, t Target) Result
}

// Drills are the drill names, in the tutorial's order.
func Drills() []string {
	return []string{"duplicate", "loss", "reorder", "poison", "replay", "reconcile"}
}

// ErrUnknownDrill is a name Select does not know.
var ErrUnknownDrill = errors.New("unknown drill")

// Select returns the cases of the named drills ("all" for every one), in
// the tutorial's order. A full case name ("loss/after-publish") selects that
// case alone.
func Select(names ...string) ([]Case, error) { return SelectFrom(Cases(), names...) }

// SelectFrom is Select among cases, in their order: a name is known when
// it is all, or a drill or case of cases.
func SelectFrom(cases []Case, names ...string) ([]Case, error) {
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: name one of %s or all", ErrUnknownDrill, strings.Join(Drills(), ", "))
	}
	want := map[string]bool{}
	for _, n := range names {
		known := n == "all" || slices.ContainsFunc(cases, func(c Case) bool { return c.Drill == n || c.Name == n })
		if !known {
			return nil, fmt.Errorf("%w %q: want one of %s, all, or a case name", ErrUnknownDrill, n, strings.Join(Drills(), ", "))
		}
		want[n] = true
	}
	var out []Case
	for _, c := range cases {
		if want["all"] || want[c.Drill] || want[c.Name] {
			out = append(out, c)
		}
	}
	return out, nil
}

// Run runs cases one after the other against t and returns their results;
// started, if not nil, is told about each case before it runs.
func Run(ctx context.Context, t Target, cases []Case, started func(Case)) []Result {
	t = t.withDefaults()
	out := make([]Result, 0, len(cases))
	for _, c := range cases {
		if started != nil {
			started(c)
		}
		out = append(out, c.Run(ctx, t))
	}
	return out
}

// Failed counts the results that are neither a pass nor a skip.
func Failed(results []Result) int {
	n := 0
	for _, r := range results {
		if !r.Pass && !r.Skipped {
			n++
		}
	}
	return n
}

// body is a case's work: it returns what it saw; a step that breaks the
// promise ends it (session.run).
type body func(s *session) (seen string)

// newCase turns a row of the case table into a Case: it checks the target,
// skips a crash case without a Controller, and turns the outcome into a
// Result.
func newCase(drill, name string, needsController bool, run body, expected string) Case {
	full := drill + "/" + name
	return Case{Name: full, Drill: drill, Run: func(ctx context.Context, t Target) Result {
		r := Result{Case: full, Expected: expected}
		t = t.withDefaults()
		if err := t.Validate(); err != nil {
			r.Seen = "target: " + err.Error()
			return r
		}
		if needsController && t.Controller == nil {
			r.Skipped = true
			r.Seen = "no controller to restart services (make run's control API, or the test harness)"
			return r
		}
		s := newSession(ctx, t, strings.ReplaceAll(full, "/", "-"))
		defer s.close()
		seen, err := s.run(run)
		// The evidence is read: whatever the verdict, the synthetic
		// orders the case planted go.
		note, cerr := s.removePlanted()
		return withCleanup(verdict(r, s.converged, seen, err), note, cerr)
	}}
}

// verdict turns a case body's outcome into its Result.
func verdict(r Result, converged time.Duration, seen string, err error) Result {
	r.Convergence = converged
	var skipped *skipError
	if errors.As(err, &skipped) {
		r.Skipped, r.Seen, r.Convergence = true, skipped.reason, 0
		return r
	}
	if err != nil {
		r.Seen = err.Error()
		return r
	}
	r.Pass, r.Seen = true, seen
	return r
}

// skipError ends a case that cannot run against this suite before it has
// done anything: newCase reports it as a SKIP, not a failure.
type skipError struct{ reason string }

func (e *skipError) Error() string { return e.reason }

func skip(reason string) error { return &skipError{reason: reason} }

// skipIfNoBroker turns a controller's ErrNoBrokerControl, or the control
// API's 409 Conflict, into a skip.
func skipIfNoBroker(err error) error {
	var status *controlapi.StatusError
	if errors.Is(err, ErrNoBrokerControl) || errors.As(err, &status) && status.Status == http.StatusConflict {
		return skip("no control of the broker: " + err.Error())
	}
	return err
}
