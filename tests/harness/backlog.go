package harness

import (
	"context"

	"github.com/reliable-orders/fulfillment/scripts/backlog"
)

// BacklogTarget is the suite as the backlog drill's target (the drill that
// `make drill-backlog` runs against `make run`): the suite's broker, topic,
// databases and consumer groups, scaled and listed through Scale and
// Instances.
func (s *Suite) BacklogTarget() backlog.Target {
	groups, dbs := map[string]string{}, map[string]string{}
	for service, group := range Consumers {
		groups[service], dbs[service] = group, s.DatabaseName(service)
	}
	return backlog.Target{
		Scaler: fleet{s}, Lister: fleet{s},
		Brokers: s.Broker.Addrs(), Topic: s.Topic, AdminToken: s.AdminToken,
		DatabaseURL: s.ServerURL(), Databases: dbs, Groups: groups,
	}
}

// fleet is the suite as the backlog drill's Scaler and Lister.
type fleet struct{ s *Suite }

func (f fleet) Scale(_ context.Context, service string, n int) error { return f.s.Scale(service, n) }

func (f fleet) Instances(_ context.Context, service string) ([]backlog.Instance, error) {
	var out []backlog.Instance
	for _, in := range f.s.Instances(service) {
		out = append(out, backlog.Instance{Name: in.Name, URL: in.URL, PID: in.PID})
	}
	return out, nil
}
