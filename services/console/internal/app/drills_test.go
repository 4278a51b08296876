package app_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/testkit/poll"
	"github.com/reliable-orders/fulfillment/scripts/controlapi"
	"github.com/reliable-orders/fulfillment/scripts/drill"
	"github.com/reliable-orders/fulfillment/services/console/internal/app"
)

// fakeControl is a control API that answers, or not.
type fakeControl struct{ err error }

func (fakeControl) Restart(context.Context, string, map[string]string) (controlapi.ServiceView, error) {
	return controlapi.ServiceView{}, nil
}

func (fakeControl) Exit(context.Context, string, time.Duration) (controlapi.ServiceView, error) {
	return controlapi.ServiceView{}, nil
}

func (f fakeControl) Services(context.Context) ([]controlapi.ServiceView, error) {
	return nil, f.err
}

func TestDrills(t *testing.T) {
	release := make(chan struct{})
	var sawController []bool
	cases := []drill.Case{
		{Name: "duplicate/one", Drill: "duplicate", Run: func(_ context.Context, tg drill.Target) drill.Result {
			sawController = append(sawController, tg.Controller != nil)
			<-release
			return drill.Result{Case: "duplicate/one", Pass: true, Expected: "once", Seen: "once", Convergence: 40 * time.Millisecond}
		}},
		{Name: "duplicate/two", Drill: "duplicate", Run: func(context.Context, drill.Target) drill.Result {
			return drill.Result{Case: "duplicate/two", Expected: "once", Seen: "twice"}
		}},
		{Name: "loss/crash", Drill: "loss", Run: func(ctx context.Context, _ drill.Target) drill.Result {
			<-ctx.Done()
			return drill.Result{Case: "loss/crash", Skipped: true}
		}},
	}
	d := app.NewDrills(app.DrillsConfig{Cases: cases, Control: fakeControl{}}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	if _, err := d.Start("nothing", "alice"); !errors.Is(err, app.ErrUnknownDrill) {
		t.Fatalf("start an unknown drill: %v", err)
	}
	run, err := d.Start("duplicate", "alice")
	if err != nil || run.ID != 1 || len(run.Cases) != 2 || run.Operator != "alice" {
		t.Fatalf("start: %+v %v", run, err)
	}
	poll.Until(t, 10*time.Second, "the first case running", func() bool {
		r, _ := d.Get(1)
		return r.Status == app.DrillRunning && r.Current == "duplicate/one"
	})
	if _, err := d.Start("loss", "bob"); !errors.Is(err, app.ErrDrillRunning) {
		t.Fatalf("a second run while one runs: %v, want ErrDrillRunning", err)
	}
	close(release)
	poll.Until(t, 10*time.Second, "the run done", func() bool { r, _ := d.Get(1); return r.Status == app.DrillDone })
	r, _ := d.Get(1)
	if len(r.Results) != 2 || r.Results[0].Verdict != "PASS" || r.Results[0].ConvergenceMs != 40 || r.Results[1].Verdict != "FAIL" ||
		!r.Controlled || r.FinishedAt == nil || len(sawController) != 1 || !sawController[0] {
		t.Errorf("run %+v, controller seen %v", r, sawController)
	}

	// A run in progress when the console stops ends CANCELLED.
	if _, err := d.Start("loss/crash", "bob"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the crash case running", func() bool { r, _ := d.Get(2); return r.Status == app.DrillRunning })
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	r, _ = d.Get(2)
	if r.Status != app.DrillCancelled || len(r.Results) != 1 || r.Results[0].Verdict != "SKIP" {
		t.Errorf("run cancelled: %+v", r)
	}
	if runs := d.Runs(); len(runs) != 2 || runs[0].ID != 2 {
		t.Errorf("runs, newest first: %+v", runs)
	}
	if n := len(d.Catalog()); n != 3 {
		t.Errorf("catalog of %d cases", n)
	}
}
