package backlog

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
)

// Sample is one round of measurements, every Interval.
type Sample struct {
	At time.Time `json:"at"`
	// Elapsed is the time since the publish started, in seconds.
	Elapsed float64 `json:"elapsedSeconds"`
	// Published counts the events the broker has acknowledged so far.
	Published int `json:"published"`
	// Groups are the watched consumer groups, in a fixed order.
	Groups []GroupSample `json:"groups"`
	// Connections are the services' database connections; ServerConnections
	// counts every connection to the Postgres server, anyone's.
	Connections       []Connections `json:"connections"`
	ServerConnections int           `json:"serverConnections"`
	// CPUBusy is the share of this machine's CPU time that was busy since
	// the previous sample (0 to 1, all cores together); absent where the
	// drill cannot read it.
	CPUBusy *float64 `json:"cpuBusy,omitempty"`
	// Errors say what could not be measured this round.
	Errors []string `json:"errors,omitempty"`
}

// GroupSample is one consumer group in one sample.
type GroupSample struct {
	Service string `json:"service"`
	Group   string `json:"group"`
	// Lag is the group's total lag; PartitionLag the lag of each
	// partition, by partition number (GET /admin/lag).
	Lag          int64   `json:"lag"`
	PartitionLag []int64 `json:"partitionLag"`
	// OldestAge is the age of the oldest unprocessed message, in seconds.
	OldestAge float64 `json:"oldestAgeSeconds"`
	// Consumed counts the messages the group's instances finished (ok or
	// rejected) since the drill started; ConsumedPerSecond is its growth
	// since the previous sample.
	Consumed          float64 `json:"consumed"`
	ConsumedPerSecond float64 `json:"consumedPerSecond"`
	// Retries and DeadLetters count since the drill started.
	Retries     float64 `json:"retries"`
	DeadLetters float64 `json:"deadLetters"`
	// HandlerP50 and HandlerP99 are the handler duration quantiles of the
	// runs since the previous sample, over every instance, in seconds.
	HandlerP50 float64 `json:"handlerP50Seconds"`
	HandlerP99 float64 `json:"handlerP99Seconds"`
	// BatchMean is the mean batch size since the previous sample when the
	// consumers export consumer_batch_size; 0 otherwise.
	BatchMean float64 `json:"batchMean,omitempty"`
	// Instances are the service's running processes.
	Instances []InstanceSample `json:"instances"`
	// Members are the group's members with their partitions, attributed
	// to an instance when possible (kadm DescribeGroups).
	Members []Member `json:"members"`
	// GroupState is the group's state at the broker ("Stable", …).
	GroupState string `json:"groupState,omitempty"`
}

// InstanceSample is one process of a consumer service in one sample.
type InstanceSample struct {
	Name string `json:"name"`
	PID  int    `json:"pid,omitempty"`
	// RSS is process_resident_memory_bytes.
	RSS float64 `json:"rssBytes"`
	// Consumed counts what this process finished since the drill started
	// (or since it started, if later).
	Consumed float64 `json:"consumed"`
}

// Member is one member of a consumer group.
type Member struct {
	// Instance is the instance it belongs to; empty when it could not be
	// attributed (the broker does not tell client ports, or the process
	// is not on this machine).
	Instance   string  `json:"instance,omitempty"`
	ClientHost string  `json:"clientHost"`
	Partitions []int32 `json:"partitions"`
}

// Connections are a database's connections at one moment (pg_stat_activity).
type Connections struct {
	Database string `json:"database"`
	// Open counts every connection; InUse those not idle (running a
	// statement or inside a transaction).
	Open  int `json:"open"`
	InUse int `json:"inUse"`
}

// sampler takes samples; it keeps the counters' baselines between them.
type sampler struct {
	d        *drill
	mu       sync.Mutex
	counters map[processKey]*instanceCounters
	prev     map[string]float64 // consumed by group at the previous sample
	prevAt   time.Time
	// cpuBusy and cpuTotal are the machine's CPU seconds at the previous
	// sample; cpuOK says they were read.
	cpuBusy, cpuTotal float64
	cpuOK             bool
}

// processKey names one process of a group: a restarted instance is a new
// process with its own counters.
type processKey struct {
	group, name string
	pid         int
}

// instanceCounters are one process's counters: their values when the
// drill first saw it (0 for a process started later) and the latest.
type instanceCounters struct {
	base, last metricValues
}

// take measures everything once, concurrently. baseline marks the first
// sample, whose counters are the zero of the run.
func (s *sampler) take(ctx context.Context, start time.Time, published int, baseline bool) Sample {
	now := time.Now()
	smp := Sample{At: now.UTC(), Elapsed: now.Sub(start).Seconds(), Published: published}
	// GET /admin/lag may take up to the lag meter's own 3 s bound on a
	// busy machine; a slow round only delays the next one (ticks drop).
	ctx, cancel := context.WithTimeout(ctx, max(4*time.Second, s.d.cfg.Interval))
	defer cancel()

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		groups = make([]GroupSample, len(s.d.watched))
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		smp.Errors = append(smp.Errors, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	members := map[string][]Member{}
	states := map[string]string{}
	wg.Go(func() {
		m, st, err := s.d.members(ctx)
		if err != nil {
			fail("group members: %v", err)
			return
		}
		mu.Lock()
		members, states = m, st
		mu.Unlock()
	})
	wg.Go(func() {
		c, total, err := s.d.connections(ctx)
		if err != nil {
			fail("database connections: %v", err)
			return
		}
		mu.Lock()
		smp.Connections, smp.ServerConnections = c, total
		mu.Unlock()
	})
	scrapes := make([][]scrape, len(s.d.watched))
	for i, service := range s.d.watched {
		groups[i] = GroupSample{Service: service, Group: s.d.t.Groups[service]}
		wg.Go(func() {
			insts, err := s.d.t.Lister.Instances(ctx, service)
			if err != nil || len(insts) == 0 {
				fail("%s: list instances: %v", service, err)
				return
			}
			var iwg sync.WaitGroup
			lag, lagErr := s.d.lag(ctx, insts)
			if lagErr != nil {
				fail("%s: %v", service, lagErr)
			}
			out := make([]scrape, len(insts))
			for j, in := range insts {
				iwg.Go(func() {
					out[j] = scrape{inst: in}
					out[j].values, out[j].err = s.d.metrics(ctx, in, s.d.t.Groups[service])
				})
			}
			iwg.Wait()
			mu.Lock()
			defer mu.Unlock()
			if lagErr == nil {
				groups[i].Lag, groups[i].OldestAge = lag.TotalLag, lag.OldestAgeSeconds
				groups[i].PartitionLag = partitionLags(lag)
			} else {
				groups[i].Lag = -1
			}
			scrapes[i] = out
		})
	}
	wg.Wait()

	s.mu.Lock()
	defer s.mu.Unlock()
	dt := now.Sub(s.prevAt).Seconds()
	for i := range groups {
		g := &groups[i]
		g.Members, g.GroupState = members[g.Group], states[g.Group]
		insts := make([]Instance, len(scrapes[i]))
		for j, sc := range scrapes[i] {
			insts[j] = sc.inst
		}
		s.d.attribute(g.Members, insts)
		s.fold(g, scrapes[i], baseline, fail)
		if !baseline && dt > 0 {
			g.ConsumedPerSecond = max(0, (g.Consumed-s.prev[g.Group])/dt)
		}
		s.prev[g.Group] = g.Consumed
	}
	s.prevAt = now
	if busy, total, ok := CPUTimes(); ok {
		if s.cpuOK && !baseline && total > s.cpuTotal {
			share := (busy - s.cpuBusy) / (total - s.cpuTotal)
			smp.CPUBusy = &share
		}
		s.cpuBusy, s.cpuTotal, s.cpuOK = busy, total, true
	}
	smp.Groups = groups
	sort.Strings(smp.Errors)
	return smp
}

// scrape is one instance's /metrics.
type scrape struct {
	inst   Instance
	values metricValues
	err    error
}

// fold turns the instances' raw counters into the group's figures since
// the drill started. A process that has gone keeps counting with its last
// values; one that could not be scraped this round too.
func (s *sampler) fold(g *GroupSample, scrapes []scrape, baseline bool, fail func(string, ...any)) {
	interval := map[float64]float64{} // handler histogram, this interval
	var batchSum, batchCount float64
	for _, sc := range scrapes {
		key := processKey{group: g.Group, name: sc.inst.Name, pid: sc.inst.PID}
		if sc.err != nil {
			fail("%s: %v", sc.inst.Name, sc.err)
			g.Instances = append(g.Instances, InstanceSample{Name: sc.inst.Name, PID: sc.inst.PID})
			continue
		}
		c, seen := s.counters[key]
		if !seen {
			c = &instanceCounters{}
			if baseline {
				c.base, c.last = sc.values, sc.values
			}
			s.counters[key] = c
		}
		for le, n := range sc.values.handlerBuckets {
			interval[le] += max(0, n-c.last.handlerBuckets[le])
		}
		batchSum += max(0, sc.values.batchSum-c.last.batchSum)
		batchCount += max(0, sc.values.batchCount-c.last.batchCount)
		c.last = sc.values
		g.Instances = append(g.Instances, InstanceSample{
			Name: sc.inst.Name, PID: sc.inst.PID, RSS: sc.values.rss,
			Consumed: sc.values.consumed - c.base.consumed,
		})
	}
	for key, c := range s.counters {
		if key.group != g.Group {
			continue
		}
		g.Consumed += c.last.consumed - c.base.consumed
		g.Retries += c.last.retries - c.base.retries
		g.DeadLetters += c.last.deadLetters - c.base.deadLetters
	}
	if !baseline {
		g.HandlerP50 = quantile(0.50, interval)
		g.HandlerP99 = quantile(0.99, interval)
		if batchCount > 0 {
			g.BatchMean = batchSum / batchCount
		}
	}
}

func partitionLags(r suiteapi.LagReport) []int64 {
	n := 0
	for _, p := range r.Partitions {
		n = max(n, int(p.Partition)+1)
	}
	out := make([]int64, n)
	for _, p := range r.Partitions {
		out[p.Partition] = p.Lag
	}
	return out
}

// instance is a client of one process's API, which the client knows by
// the instance's name.
func (d *drill) instance(in Instance) *suiteapi.Client {
	return suiteapi.New(suiteapi.Config{URLs: map[string]string{in.Name: in.URL}, AdminToken: d.t.AdminToken, HTTPClient: d.t.HTTPClient})
}

// lag reads GET /admin/lag from the first instance that answers: the lag
// is the group's, measured at the broker, whichever member is asked.
func (d *drill) lag(ctx context.Context, insts []Instance) (suiteapi.LagReport, error) {
	var last error
	for _, in := range insts {
		r, err := d.instance(in).Lag(ctx, in.Name)
		if err == nil {
			return r, nil
		}
		last = err
	}
	return suiteapi.LagReport{}, last
}
