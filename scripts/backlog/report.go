package backlog

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is the drill's result: the figures the tutorial asks for, the
// checks and the verdict. Moments are in seconds since the publish started.
type Report struct {
	RunID     string    `json:"runId"`
	StartedAt time.Time `json:"startedAt"`
	Count     int       `json:"count"`
	// Mix says Count counts the orders of the mixed load, not events.
	Mix  bool `json:"mix,omitempty"`
	SKUs int  `json:"skus"`
	// Services were scaled from 1 to Instances after ScaleAfterSeconds.
	Services          []string `json:"services"`
	Instances         int      `json:"instances"`
	ScaleAfterSeconds float64  `json:"scaleAfterSeconds"`
	IntervalSeconds   float64  `json:"intervalSeconds"`

	Published      int      `json:"published"`
	PublishSeconds *float64 `json:"publishSeconds,omitempty"`
	PublishRate    float64  `json:"publishRate"`
	// ScaleRequested: the scale-out was asked for; ScaleReady: every new
	// instance answered /readyz; Rebalanced: every scaled group had one
	// member per instance, each with partitions; Drained: no lag in any
	// group and every event of the run recorded (or dead-lettered) by every
	// verified service — the time to drain.
	ScaleRequested *float64 `json:"scaleRequestedSeconds,omitempty"`
	ScaleReady     *float64 `json:"scaleReadySeconds,omitempty"`
	Rebalanced     *float64 `json:"rebalancedSeconds,omitempty"`
	Drained        *float64 `json:"drainedSeconds,omitempty"`
	TimedOut       bool     `json:"timedOut,omitempty"`
	ScaleError     string   `json:"scaleError,omitempty"`

	Groups      []GroupReport      `json:"groups"`
	Connections []ConnectionReport `json:"connections"`
	// PeakServerConnections is the most client connections the Postgres
	// server had at once, anyone's; MaxConnections its max_connections.
	PeakServerConnections int `json:"peakServerConnections"`
	MaxConnections        int `json:"maxConnections"`
	// SampleErrors counts the samples in which something could not be
	// measured; FirstErrors are a few of the messages.
	SampleErrors int      `json:"sampleErrors"`
	FirstErrors  []string `json:"firstErrors,omitempty"`

	// CPUs is this machine's core count; CPUBefore and CPUAfter are the
	// mean busy share of its CPU time (0 to 1) in the windows of the
	// groups' Before and After rates, absent where it could not be read.
	// Limit says what limited the drain when the report can tell: "cpu"
	// when the machine was at least 90 % busy after the scale-out.
	CPUs      int      `json:"cpus"`
	CPUBefore *float64 `json:"cpuBusyBefore,omitempty"`
	CPUAfter  *float64 `json:"cpuBusyAfter,omitempty"`
	Limit     string   `json:"limit,omitempty"`

	Checks []Check `json:"checks"`
	Pass   bool    `json:"pass"`
}

// GroupReport is one consumer group's figures over the run.
type GroupReport struct {
	Service string `json:"service"`
	Group   string `json:"group"`
	Scaled  bool   `json:"scaled"`
	// PeakLag is the highest total lag, at PeakLagAt.
	PeakLag   int64   `json:"peakLag"`
	PeakLagAt float64 `json:"peakLagAtSeconds"`
	// PeakOldestAge is the highest oldest-unprocessed-message age, seconds.
	PeakOldestAge float64 `json:"peakOldestAgeSeconds"`
	// Before is the mean consumed/s from the publish start to the
	// scale-out, After from the scaled group settling (or the instances
	// being ready) to the drain; Peak the highest one-interval rate.
	Before float64 `json:"consumedPerSecondBefore"`
	After  float64 `json:"consumedPerSecondAfter"`
	Peak   float64 `json:"consumedPerSecondPeak"`
	// Consumed, Retries and DeadLetters count over the run, from the
	// consumers' counters.
	Consumed    float64 `json:"consumed"`
	Retries     float64 `json:"retries"`
	DeadLetters float64 `json:"deadLetters"`
	// HandlerP99Max is the highest one-interval p99 handler duration.
	HandlerP99Max float64 `json:"handlerP99MaxSeconds"`
	// PeakRSS is the highest resident memory of one of its processes,
	// which one, and when (seconds from the publish start).
	PeakRSS         float64 `json:"peakRssBytes"`
	PeakRSSInstance string  `json:"peakRssInstance"`
	PeakRSSAt       float64 `json:"peakRssAtSeconds"`
	// PeakInstances is the most processes seen at once.
	PeakInstances int `json:"peakInstances"`
	// Assignment is the group's partition assignment at the end.
	Assignment []Member `json:"assignment"`
}

// ConnectionReport is one database's peak connections.
type ConnectionReport struct {
	Database  string `json:"database"`
	PeakOpen  int    `json:"peakOpen"`
	PeakInUse int    `json:"peakInUse"`
}

// buildReport computes the figures from the timeline and adds the checks
// that need no database: published, drained, scaled out, one owner per
// partition.
func buildReport(cfg Config, tl *timeline) *Report {
	r := &Report{
		RunID: cfg.RunID, StartedAt: tl.start.UTC(), Count: cfg.Count, Mix: cfg.Mix, SKUs: cfg.SKUs,
		Services: cfg.Services, Instances: cfg.Instances,
		ScaleAfterSeconds: cfg.ScaleAfter.Seconds(), IntervalSeconds: cfg.Interval.Seconds(),
		Published: tl.publish.Published, PublishSeconds: tl.publishEnd, PublishRate: tl.publish.Rate(),
		ScaleRequested: tl.scaleRequested, ScaleReady: tl.scaleReady, Rebalanced: tl.rebalanced,
		Drained: tl.drained, TimedOut: tl.timedOut,
	}
	if tl.scaleErr != nil {
		r.ScaleError = tl.scaleErr.Error()
	}
	if len(tl.samples) == 0 {
		return r
	}
	last := tl.samples[len(tl.samples)-1]
	// The rates after the scale-out run from the groups settling (or the
	// instances being ready) to the drain.
	from := cmp.Or(tl.rebalanced, tl.scaleReady)
	after := from != nil && tl.drained != nil && *tl.drained > *from
	for gi, g := range last.Groups {
		gr := GroupReport{Service: g.Service, Group: g.Group, Scaled: slices.Contains(cfg.Services, g.Service),
			Consumed: g.Consumed, Retries: g.Retries, DeadLetters: g.DeadLetters, Assignment: g.Members}
		for _, s := range tl.samples {
			if gi >= len(s.Groups) {
				continue
			}
			sg := s.Groups[gi]
			if sg.Lag > gr.PeakLag {
				gr.PeakLag, gr.PeakLagAt = sg.Lag, s.Elapsed
			}
			gr.PeakOldestAge = max(gr.PeakOldestAge, sg.OldestAge)
			gr.Peak = max(gr.Peak, sg.ConsumedPerSecond)
			gr.HandlerP99Max = max(gr.HandlerP99Max, sg.HandlerP99)
			gr.PeakInstances = max(gr.PeakInstances, len(sg.Instances))
			for _, in := range sg.Instances {
				if in.RSS > gr.PeakRSS {
					gr.PeakRSS, gr.PeakRSSInstance, gr.PeakRSSAt = in.RSS, in.Name, s.Elapsed
				}
			}
		}
		if tl.scaleRequested != nil {
			gr.Before = rate(tl.samples, gi, 0, *tl.scaleRequested)
		}
		if after {
			gr.After = rate(tl.samples, gi, *from, *tl.drained)
		}
		r.Groups = append(r.Groups, gr)
	}
	r.CPUs = runtime.NumCPU() // the count the busy share is of
	if tl.scaleRequested != nil {
		r.CPUBefore = meanCPU(tl.samples, 0, *tl.scaleRequested)
	}
	if after {
		r.CPUAfter = meanCPU(tl.samples, *from, *tl.drained)
	}
	if busy := cmp.Or(r.CPUAfter, r.CPUBefore); busy != nil && *busy >= cpuBusyFloor {
		r.Limit = "cpu"
	}
	r.MaxConnections = tl.maxConnections
	for _, s := range tl.samples {
		r.PeakServerConnections = max(r.PeakServerConnections, s.ServerConnections)
		// Every sample that counted the connections lists the same
		// databases in the same order.
		for i, c := range s.Connections {
			if i == len(r.Connections) {
				r.Connections = append(r.Connections, ConnectionReport{Database: c.Database})
			}
			p := &r.Connections[i]
			p.PeakOpen, p.PeakInUse = max(p.PeakOpen, c.Open), max(p.PeakInUse, c.InUse)
		}
		if len(s.Errors) > 0 {
			r.SampleErrors++
			for _, e := range s.Errors {
				if len(r.FirstErrors) < 5 && !slices.Contains(r.FirstErrors, e) {
					r.FirstErrors = append(r.FirstErrors, e)
				}
			}
		}
	}

	r.Checks = append(r.Checks, Check{Name: "published", Pass: tl.publishErr == nil && tl.publish.Published == cfg.Count,
		Want: fmt.Sprintf("%d %s acknowledged", cfg.Count, unit(cfg.Mix)), Got: fmt.Sprintf("%d acknowledged, %d failed", tl.publish.Published, tl.publish.Failed)})
	got := "not drained"
	switch {
	case tl.drained != nil:
		got = fmt.Sprintf("drained %.1fs after the publish started", *tl.drained)
	case tl.timedOut:
		got = fmt.Sprintf("not drained within %s; accounted %v", cfg.Timeout, tl.accounted)
	}
	r.Checks = append(r.Checks, Check{Name: "drained", Pass: tl.drained != nil,
		Want: "no lag in any group, every event recorded by every service", Got: got})
	got = "scale-out not requested"
	switch {
	case tl.scaleErr != nil:
		got = tl.scaleErr.Error()
	case tl.rebalanced != nil:
		got = fmt.Sprintf("settled %.1fs after the publish started", *tl.rebalanced)
	case tl.scaleReady != nil:
		got = "the groups did not settle with every instance owning partitions"
	}
	members := "members"
	if cfg.Instances == 1 {
		members = "member"
	}
	r.Checks = append(r.Checks, Check{Name: "scaled out", Pass: tl.scaleErr == nil && tl.rebalanced != nil,
		Want: fmt.Sprintf("%d %s in each scaled group, each owning partitions", cfg.Instances, members), Got: got})
	got = fmt.Sprintf("one owner per partition in all %d samples", len(tl.samples))
	pass := true
	for _, s := range tl.samples {
		if why, ok := exclusive(s); !ok {
			got, pass = why, false
			break
		}
	}
	r.Checks = append(r.Checks, Check{Name: "one owner per partition", Pass: pass,
		Want: "no partition assigned to two members of a group at once", Got: got})
	return r
}

// meanCPU is the mean busy share of the samples taken between from and
// to, nil when none of them measured it.
func meanCPU(samples []Sample, from, to float64) *float64 {
	var sum float64
	var n int
	for _, s := range samples {
		if s.CPUBusy != nil && s.Elapsed > from && s.Elapsed <= to {
			sum += *s.CPUBusy
			n++
		}
	}
	if n == 0 {
		return nil
	}
	mean := sum / float64(n)
	return &mean
}

// rate is group gi's mean consumed/s between the samples nearest to from
// and to.
func rate(samples []Sample, gi int, from, to float64) float64 {
	a, b := nearest(samples, from), nearest(samples, to)
	if b.Elapsed <= a.Elapsed || gi >= len(a.Groups) || gi >= len(b.Groups) {
		return 0
	}
	return (b.Groups[gi].Consumed - a.Groups[gi].Consumed) / (b.Elapsed - a.Elapsed)
}

func nearest(samples []Sample, at float64) Sample {
	i := sort.Search(len(samples), func(i int) bool { return samples[i].Elapsed >= at })
	switch {
	case i == len(samples):
		return samples[len(samples)-1]
	case i > 0 && at-samples[i-1].Elapsed < samples[i].Elapsed-at:
		return samples[i-1]
	}
	return samples[i]
}

// view is the report as both renderings show it, the text table
// (WriteTable) and the page (WriteHTML): the same rows, formatted once.
type view struct {
	*Report
	// Summary says what ran: "550 events, inventory scaled 1 → 2 after 30.0s".
	Summary string
	// Moments, Connections and Assignment are rows of a name and a value.
	Moments, Connections, Assignment [][2]string
	// Groups are the per-group figures: the services, then one row per
	// figure, its name first.
	Groups [][]string
	// Errors says how many samples missed a measurement, "" when none did.
	Errors string
	// Conclusion is the verdict as the report ends with it.
	Conclusion string
}

func newView(r *Report) view {
	v := view{Report: r, Conclusion: "FAIL",
		Summary: fmt.Sprintf("%d %s, %s scaled 1 → %d after %s", r.Count, unit(r.Mix), strings.Join(r.Services, ", "),
			r.Instances, seconds(r.ScaleAfterSeconds))}
	if r.Pass {
		v.Conclusion = "PASS: every event of the run applied exactly once, in order, nothing dead-lettered"
	}
	perSecond := "events/s"
	if r.Mix {
		perSecond = "orders/s"
	}
	v.Moments = [][2]string{
		{"time to drain", moment(r.Drained)},
		{"publish", fmt.Sprintf("%d %s acknowledged by %s (%s %s while publishing)", r.Published, unit(r.Mix),
			moment(r.PublishSeconds), count(r.PublishRate), perSecond)},
		{"scale-out", fmt.Sprintf("requested at %s, instances ready at %s, groups settled at %s",
			moment(r.ScaleRequested), moment(r.ScaleReady), moment(r.Rebalanced))},
	}
	if r.CPUBefore != nil || r.CPUAfter != nil {
		v.Moments = append(v.Moments, [2]string{"this machine's CPU",
			fmt.Sprintf("%s busy before scaling, %s after (%d cores)", share(r.CPUBefore), share(r.CPUAfter), r.CPUs)})
	}
	if r.Limit == "cpu" {
		v.Moments = append(v.Moments, [2]string{"limit", fmt.Sprintf("the CPU, not the consumers: the machine was at least %.0f %% busy, "+
			"so another instance takes time from the services, Postgres and the broker on the same cores instead of adding any", cpuBusyFloor*100)})
	}
	for _, c := range r.Connections {
		v.Connections = append(v.Connections, [2]string{c.Database, fmt.Sprintf("%d / %d", c.PeakOpen, c.PeakInUse)})
	}
	v.Connections = append(v.Connections, [2]string{"the whole server",
		fmt.Sprintf("%d of max_connections %d", r.PeakServerConnections, r.MaxConnections)})
	for _, g := range r.Groups {
		v.Assignment = append(v.Assignment, [2]string{g.Group, assignment(g.Assignment)})
	}
	if r.SampleErrors > 0 {
		v.Errors = fmt.Sprintf("%d samples missed a measurement, e.g. %s", r.SampleErrors, strings.Join(r.FirstErrors, "; "))
	}
	for _, row := range []struct {
		name string
		cell func(GroupReport) string
	}{
		{"", func(g GroupReport) string { return g.Service }},
		{"peak lag", func(g GroupReport) string { return count(float64(g.PeakLag)) }},
		{"peak oldest age", func(g GroupReport) string { return seconds(g.PeakOldestAge) }},
		{"consumed/s before scaling", func(g GroupReport) string { return count(g.Before) }},
		{"consumed/s after scaling", func(g GroupReport) string { return count(g.After) }},
		{"consumed/s peak", func(g GroupReport) string { return count(g.Peak) }},
		{"consumed", func(g GroupReport) string { return count(g.Consumed) }},
		{"retries", func(g GroupReport) string { return count(g.Retries) }},
		{"dead letters", func(g GroupReport) string { return count(g.DeadLetters) }},
		{"handler p99 (max)", func(g GroupReport) string { return seconds(g.HandlerP99Max) }},
		{"instances (max)", func(g GroupReport) string { return fmt.Sprint(g.PeakInstances) }},
		{"peak RSS of one process", func(g GroupReport) string { return mib(g.PeakRSS) }},
	} {
		cells := []string{row.name}
		for _, g := range r.Groups {
			cells = append(cells, row.cell(g))
		}
		v.Groups = append(v.Groups, cells)
	}
	return v
}

// WriteTable writes the report as aligned tables: the moments, one column
// per consumer group, the database connections, the partition assignment,
// the checks and the verdict.
func WriteTable(w io.Writer, r *Report) error {
	v := newView(r)
	// The figures align right, on a writer of their own; a line without a
	// tab ends the columns of the one around it.
	var groups strings.Builder
	gw := tabwriter.NewWriter(&groups, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, row := range v.Groups {
		fmt.Fprintln(gw, strings.Join(row, "\t")+"\t")
	}
	if err := gw.Flush(); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	pairs := func(indent string, rows [][2]string) {
		for _, p := range rows {
			fmt.Fprintf(tw, "%s%s\t%s\n", indent, p[0], p[1])
		}
	}
	fmt.Fprintf(tw, "\nbacklog drill %s: %s\n\n", r.RunID, v.Summary)
	pairs("", v.Moments)
	fmt.Fprintf(tw, "\n%s\ndatabase connections (peak open / peak in use):\n", groups.String())
	pairs("  ", v.Connections)
	fmt.Fprintln(tw, "\npartition assignment at the end (instance: partitions):")
	pairs("  ", v.Assignment)
	if v.Errors != "" {
		fmt.Fprintf(tw, "\n%s\n", v.Errors)
	}
	fmt.Fprintln(tw, "\nRESULT\tCHECK\tWANT\tGOT")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", verdict(c.Pass), c.Name, c.Want, c.Got)
	}
	fmt.Fprintf(tw, "\nverdict: %s\n", v.Conclusion)
	return tw.Flush()
}

func verdict(pass bool) string {
	if pass {
		return "PASS"
	}
	return "FAIL"
}

// share writes a busy share as a percentage, "-" when unknown.
func share(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f %%", *v*100)
}

// assignment writes members as "inventory#2: 0,1,2  inventory: 3,4".
func assignment(members []Member) string {
	if len(members) == 0 {
		return "(no members)"
	}
	parts := make([]string, 0, len(members))
	for _, m := range members {
		who := cmp.Or(m.Instance, "member at "+m.ClientHost)
		ps := make([]string, len(m.Partitions))
		for i, p := range m.Partitions {
			ps[i] = fmt.Sprint(p)
		}
		if len(ps) == 0 {
			ps = []string{"none"}
		}
		parts = append(parts, who+": "+strings.Join(ps, ","))
	}
	return strings.Join(parts, "  ")
}

func moment(v *float64) string {
	if v == nil {
		return "-"
	}
	return seconds(*v)
}

func seconds(s float64) string {
	switch {
	case s == 0:
		return "0"
	case s < 1:
		return fmt.Sprintf("%.0fms", s*1000)
	}
	return fmt.Sprintf("%.1fs", s)
}

// count writes a figure with thin grouping: 100 000.
func count(v float64) string {
	n := int64(math.Round(v))
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func mib(bytes float64) string {
	if bytes == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", bytes/(1<<20))
}

// unit is what Count and Published count: OrderPaid events, or the orders
// of the mixed load (each one or more events).
func unit(mix bool) string {
	if mix {
		return "orders (mixed load)"
	}
	return "events"
}
