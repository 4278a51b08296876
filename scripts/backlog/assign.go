package backlog

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// members describes the watched groups at the broker (kadm DescribeGroups):
// each member's client address and assigned partitions of the topic, and
// the group's state.
func (d *drill) members(ctx context.Context) (map[string][]Member, map[string]string, error) {
	groups := make([]string, 0, len(d.watched))
	for _, s := range d.watched {
		groups = append(groups, d.t.Groups[s])
	}
	described, err := d.adm.DescribeGroups(ctx, groups...)
	if err != nil {
		return nil, nil, fmt.Errorf("describe groups: %w", err)
	}
	members, states := map[string][]Member{}, map[string]string{}
	for _, g := range described.Sorted() {
		if g.Err != nil {
			return nil, nil, fmt.Errorf("describe group %s: %w", g.Group, g.Err)
		}
		states[g.Group] = g.State
		for _, m := range g.Members {
			mem := Member{ClientHost: m.ClientHost, Partitions: []int32{}}
			if c, ok := m.Assigned.AsConsumer(); ok {
				for _, t := range c.Topics {
					if t.Topic == d.t.Topic {
						mem.Partitions = append(mem.Partitions, t.Partitions...)
					}
				}
			}
			slices.Sort(mem.Partitions)
			members[g.Group] = append(members[g.Group], mem)
		}
	}
	return members, states, nil
}

// attribute names the instance of each member whose client address is a
// local TCP connection of one of insts' processes. Kafka itself reports
// only the client's host; the embedded broker (kfake) reports host:port,
// which is enough to find the process that owns the socket.
func (d *drill) attribute(members []Member, insts []Instance) {
	names := map[int]string{}
	var pids []int
	for _, in := range insts {
		if in.PID > 0 {
			names[in.PID] = in.Name
			pids = append(pids, in.PID)
		}
	}
	for i := range members {
		m := &members[i]
		if pid, ok := d.owners[m.ClientHost]; ok && names[pid] != "" {
			m.Instance = names[pid]
			continue
		}
		port := clientPort(m.ClientHost)
		if port == 0 || len(pids) == 0 {
			continue
		}
		if pid, ok := socketOwner(port, pids); ok {
			d.owners[m.ClientHost] = pid
			m.Instance = names[pid]
		}
	}
	slices.SortFunc(members, func(a, b Member) int {
		return cmp.Or(strings.Compare(a.Instance, b.Instance), strings.Compare(a.ClientHost, b.ClientHost))
	})
}

// clientPort is the port of a member's client address ("127.0.0.1:53012"
// from the embedded broker), 0 when the broker gave only a host.
func clientPort(hostPort string) int {
	_, port, err := net.SplitHostPort(strings.TrimPrefix(hostPort, "/"))
	if err != nil {
		return 0
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return 0
	}
	return p
}
