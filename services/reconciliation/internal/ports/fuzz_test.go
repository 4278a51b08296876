package ports_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/testkit/httpapitest"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/app"
	rec "github.com/reliable-orders/fulfillment/services/reconciliation/internal/domain/reconciliation"
	"github.com/reliable-orders/fulfillment/services/reconciliation/internal/ports"
)

// echoReconciler answers a start with a RUNNING run of the scope it was
// given.
type echoReconciler struct{}

func (echoReconciler) Start(_ context.Context, startedBy string, scope rec.Scope) (rec.Run, error) {
	return rec.Run{ID: 1, StartedBy: startedBy, Scope: scope, Status: rec.RunRunning, StartedAt: time.Now()}, nil
}

func (echoReconciler) Check(_ context.Context, orderID string) (app.Check, error) {
	return app.Check{OrderID: orderID, Converged: true}, nil
}

func (echoReconciler) Deadline() time.Duration { return 30 * time.Second }

type noAudit struct{}

func (noAudit) Run(context.Context, int64) (rec.Run, error)              { return rec.Run{}, nil }
func (noAudit) Runs(context.Context, int) ([]rec.Run, []int, error)      { return nil, nil, nil }
func (noAudit) Findings(context.Context, string) ([]rec.Recorded, error) { return nil, nil }

// FuzzStartRun sends any body and X-Operator to POST
// /admin/reconciliation/runs, whose body is decoded strictly by the
// handler itself: the answer is a 2xx or a 4xx with a JSON businessCode,
// never a 5xx or a panic.
func FuzzStartRun(f *testing.F) {
	f.Add("", []byte(``))
	f.Add("operator", []byte(`{"orderIds":["O-1","O-2"],"minAge":"0s"}`))
	f.Add("", []byte(`{"orderIDs":["O-1"]}`))
	f.Add("", []byte(`{"minAge":"soon"}`))
	f.Add("", []byte(`{"minAge":"-5s"} {}`))
	f.Add("", []byte(`{"minAge":"9223372036854775807ns"}`))
	f.Add("x\x00y", []byte(`[]`))
	f.Add("tab\tand\x7f", []byte(``))
	f.Add("next\u0085line", []byte(`{"orderIds":["O-1"]}`))
	f.Fuzz(func(t *testing.T, requestedBy string, body []byte) {
		srv := httpapi.New(httpapi.Config{MapError: ports.MapError}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		ports.NewHandler(echoReconciler{}, noAudit{}).Register(srv.Admin())
		header := map[string]string{}
		if requestedBy != "" {
			header[ports.RequestedByHeader] = requestedBy
		}
		httpapitest.CheckAnswer(t, httpapitest.Do(srv.Echo, http.MethodPost, "/admin/reconciliation/runs", body, header), false)
	})
}
