// Command reconcile starts a reconciliation run and waits for it to end,
// or shows one, through the reconciliation service's API and prints it as
// a table: the run, then one line per finding with what was expected, what
// was found, the action and what became of it, and how long each of its
// phases took. While a run goes on it reports on stderr its phase and how
// far it has got (orders checked; in the orphan pass, each consumer's
// effect orders read); a run already going is waited out first (one runs
// at a time).
//
//	go run ./scripts/reconcile [--order O-1 --order O-2] [--min-age 0s] [--by alice]
//	go run ./scripts/reconcile --show 12
//	go run ./scripts/reconcile --runs
//
// RECONCILIATION_URL (default make run's http://127.0.0.1:8086) and
// ADMIN_TOKEN come from the environment. It exits 1 when the run failed or
// the service refused the request, 2 on a usage error.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/scripts/internal/cli"
	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

func main() { cli.Main("reconcile", "", run) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reconcile", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var orders []string
	fs.Func("order", "reconcile only this order (repeat, or separate with commas); default: every order older than the deadline", func(v string) error {
		orders = append(orders, envconfig.Split(v)...)
		return nil
	})
	minAge := fs.String("min-age", "", `reconcile orders whose last change is older than this ("0s": all); default: the convergence deadline`)
	by := fs.String("by", "make reconcile", "who starts the run (recorded in its audit)")
	show := fs.Int64("show", 0, "show run N instead of starting one")
	runs := fs.Bool("runs", false, "list the latest runs instead of starting one")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	env := envconfig.New(getenv)
	api := suiteapi.New(suiteapi.Config{
		URLs:       map[string]string{suiteapi.Reconciliation: env.String("RECONCILIATION_URL", "http://127.0.0.1:8086")},
		AdminToken: env.String("ADMIN_TOKEN", ""),
		// Each call is short: the run is the service's, followed by polling.
		HTTPClient: &http.Client{Timeout: 30 * time.Second},
	})
	defer api.Close()

	switch {
	case *runs:
		list, err := api.ReconciliationRuns(ctx)
		if err != nil {
			return suiteapi.Explain(err)
		}
		return listRuns(stdout, list)
	case *show > 0:
		r, err := api.ReconciliationRun(ctx, *show)
		if err != nil {
			return suiteapi.Explain(err)
		}
		return runView(r).print(stdout)
	}
	r, err := api.RunReconciliation(ctx, *by, suiteapi.RunRequest{OrderIDs: orders, MinAge: *minAge}, progress(stderr))
	if r.ID > 0 {
		// A run that failed is printed too: what it found before.
		if perr := runView(r).print(stdout); err == nil {
			err = perr
		}
	}
	return suiteapi.Explain(err)
}

// progress reports a running run on w when it has got further than at its
// last report (orders checked, its phase, effect orders read), at most
// every progressEvery.
func progress(w io.Writer) func(suiteapi.Run) {
	var last time.Time
	reported := ""
	return func(r suiteapi.Run) {
		at := where(r)
		if at == reported || time.Since(last) < progressEvery {
			return
		}
		reported, last = at, time.Now()
		fmt.Fprintf(w, "run %d RUNNING for %s: %s; %d findings so far\n", r.ID, time.Since(r.StartedAt).Round(time.Second), at, len(r.Findings))
	}
}

// where says how far a running run has got: the orders compared, and in
// the orphan pass the effect orders read from each consumer.
func where(r suiteapi.Run) string {
	if r.Phase != "ORPHANS" {
		return fmt.Sprintf("comparing, %d orders checked", r.Checked)
	}
	return fmt.Sprintf("%d orders checked; orphan effects, %s", r.Checked, scans(r.OrphanScan))
}

// scans lists how far the orphan pass read each consumer's orders.
func scans(ss []suiteapi.OrphanScan) string {
	parts := make([]string, len(ss))
	for i, sc := range ss {
		parts[i] = fmt.Sprintf("%s %d orders in %d pages", sc.Service, sc.Orders, sc.Pages)
		if sc.Orphans > 0 {
			parts[i] += fmt.Sprintf(", %d orphans", sc.Orphans)
		}
		if sc.Done {
			parts[i] += " (done)"
		}
	}
	return strings.Join(parts, ", ")
}

// progressEvery is how often a long run's progress is reported.
const progressEvery = 5 * time.Second

// runView is a run as the service answers it.
type runView suiteapi.Run

// print writes the run and a table of its findings; it fails when the run
// did.
func (r runView) print(w io.Writer) error {
	scope := "orders older than " + r.MinAge
	if len(r.OrderIDs) > 0 {
		scope = fmt.Sprintf("%d orders named", len(r.OrderIDs))
	}
	fmt.Fprintf(w, "run %d %s: started by %s at %s, %s; checked %d orders in %s, %d findings, %d actions\n",
		r.ID, r.Status, r.StartedBy, r.StartedAt.UTC().Format(time.RFC3339), scope, r.Checked, took(r.StartedAt, r.FinishedAt), len(r.Findings), r.Actions)
	if len(r.Phases) > 0 {
		parts := make([]string, len(r.Phases))
		for i, p := range r.Phases {
			parts[i] = strings.ToLower(p.Phase) + " " + took(p.StartedAt, p.FinishedAt)
		}
		fmt.Fprintf(w, "phases: %s\n", strings.Join(parts, ", "))
	}
	if len(r.OrphanScan) > 0 {
		fmt.Fprintf(w, "orphan effects: %s\n", scans(r.OrphanScan))
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error: %s\n", r.Error)
	}
	if len(r.InFlight) > 0 {
		fmt.Fprintf(w, "in flight, not compared (changed within %s): %s\n", r.MinAge, strings.Join(r.InFlight, " "))
	}
	if len(r.Findings) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ORDER\tKIND\tSERVICE\tEXPECTED\tFOUND\tACTION\tOUTCOME")
		for _, f := range r.Findings {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.OrderID, f.Kind, f.Service, f.Expected, f.Actual, f.Action, f.Outcome)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if r.Status == "FAILED" {
		return fmt.Errorf("run %d failed: %s", r.ID, r.Error)
	}
	return nil
}

// listRuns writes the latest runs as a table.
func listRuns(w io.Writer, runs []suiteapi.RunSummary) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tSTATUS\tSTARTED BY\tSTARTED\tTOOK\tCHECKED\tFINDINGS\tACTIONS")
	for _, r := range runs {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", r.ID, r.Status, r.StartedBy, r.StartedAt.UTC().Format(time.RFC3339),
			took(r.StartedAt, r.FinishedAt), r.Checked, r.Findings, r.Actions)
	}
	return tw.Flush()
}

// took is how long a run took, "-" while it goes on.
func took(start time.Time, end *time.Time) string {
	if end == nil {
		return "-"
	}
	return end.Sub(start).Round(time.Millisecond).String()
}
