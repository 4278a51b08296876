package drill

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteTable writes one aligned line per result — verdict, case,
// convergence time, what was expected and what was seen — and a summary
// line.
func WriteTable(w io.Writer, results []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RESULT\tCASE\tCONVERGED\tEXPECTED\tSEEN")
	skipped := 0
	for _, r := range results {
		if r.Skipped {
			skipped++
		}
		converged := "-"
		if r.Convergence > 0 {
			converged = formatDuration(r.Convergence)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Verdict(), r.Case, converged, r.Expected, r.Seen)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	failed := Failed(results)
	_, err := fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped\n", len(results)-failed-skipped, failed, skipped)
	return err
}

// formatDuration rounds d to what a person reads: 3 significant places.
func formatDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
