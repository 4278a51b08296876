package app_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/services/console/internal/app"
)

// fakeFailPoints: points declares points.apply, reconciliation serves no
// fail points, notification is down.
type fakeFailPoints struct{ armed []string }

func (f *fakeFailPoints) FailPoints(_ context.Context, svc string) ([]suiteapi.FailPoint, error) {
	switch svc {
	case "reconciliation":
		return nil, &suiteapi.StatusError{Status: 404}
	case "notification":
		return nil, errDown
	}
	return []failpoint.Point{{Name: svc + ".apply", Action: "off"}}, nil
}

func (f *fakeFailPoints) ArmFailPoint(_ context.Context, svc, name, action string, _ int) error {
	f.armed = append(f.armed, svc+" "+name+" "+action)
	return nil
}

// fakeRunner is the runner's control API with inventory scaled to two.
type fakeRunner struct{ calls []string }

func (f *fakeRunner) Services(context.Context) ([]controlapi.ServiceView, error) {
	return []controlapi.ServiceView{
		{Name: "inventory#2", Service: "inventory", Instance: 2, State: "running"},
		{Name: "inventory", Service: "inventory", Instance: 1, State: "running"},
		{Name: "points", State: "stopped"},
	}, nil
}

func (f *fakeRunner) Restart(_ context.Context, svc string, _ map[string]string) (controlapi.ServiceView, error) {
	f.calls = append(f.calls, "restart "+svc)
	return controlapi.ServiceView{Name: svc, State: "running"}, nil
}

func (f *fakeRunner) Stop(_ context.Context, svc string) (controlapi.ServiceView, error) {
	f.calls = append(f.calls, "stop "+svc)
	return controlapi.ServiceView{Name: svc, State: "stopped"}, nil
}

func (f *fakeRunner) Scale(_ context.Context, svc string, _ int) (controlapi.ScaleView, error) {
	f.calls = append(f.calls, "scale "+svc)
	return controlapi.ScaleView{Service: svc}, nil
}

func TestSwitches(t *testing.T) {
	fp, runner := &fakeFailPoints{}, &fakeRunner{}
	var log bytes.Buffer
	s := app.NewSwitches(fp, runner, slog.New(slog.NewTextHandler(&log, nil)))
	v := s.State(context.Background())
	if !v.Controlled || v.ControlError != "" || len(v.Services) != len(app.Services) {
		t.Fatalf("state %+v", v)
	}
	by := map[string]app.ServiceSwitches{}
	for _, sw := range v.Services {
		by[sw.Service] = sw
	}
	if p := by["inventory"].Processes; len(p) != 2 || p[0].Name != "inventory" || p[1].Name != "inventory#2" {
		t.Errorf("inventory's processes %+v, want its own then #2", p)
	}
	if p := by["points"].Processes; len(p) != 1 || p[0].State != "stopped" || len(by["points"].FailPoints) != 1 {
		t.Errorf("points: %+v", by["points"])
	}
	if !strings.Contains(by["reconciliation"].FailPointsError, "FAILPOINTS_ENABLED=false") || by["notification"].FailPointsError != errDown.Error() {
		t.Errorf("fail point errors: %q, %q", by["reconciliation"].FailPointsError, by["notification"].FailPointsError)
	}

	ctx := context.Background()
	if err := s.ArmFailPoint(ctx, "points", "points.apply", "error", 3, "alice"); err != nil || len(fp.armed) != 1 {
		t.Fatalf("arm: %v %v", err, fp.armed)
	}
	if _, err := s.Stop(ctx, "points", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Start(ctx, "points", "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Scale(ctx, "inventory", 2, "alice"); err != nil {
		t.Fatal(err)
	}
	if strings.Join(runner.calls, ",") != "stop points,restart points,scale inventory" || strings.Count(log.String(), "operator=alice") != 4 {
		t.Errorf("calls %v, log %s", runner.calls, log.String())
	}
	if _, err := s.Stop(ctx, "kafka", "alice"); !errors.Is(err, app.ErrUnknownService) {
		t.Errorf("stop kafka: %v", err)
	}
	if err := s.ArmFailPoint(ctx, "kafka", "x", "error", 0, "alice"); !errors.Is(err, app.ErrUnknownService) {
		t.Errorf("arm kafka's: %v", err)
	}
	uncontrolled := app.NewSwitches(fp, nil, slog.New(slog.NewTextHandler(&log, nil)))
	if _, err := uncontrolled.Stop(ctx, "points", "alice"); !errors.Is(err, app.ErrNoControl) {
		t.Errorf("stop without a control API: %v", err)
	}
	if _, err := uncontrolled.Scale(ctx, "points", 2, "alice"); !errors.Is(err, app.ErrNoControl) {
		t.Errorf("scale without a control API: %v", err)
	}
	if v := uncontrolled.State(ctx); v.Controlled {
		t.Errorf("uncontrolled state %+v", v)
	}
}
