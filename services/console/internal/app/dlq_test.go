package app_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/suiteapi"
	"github.com/reliable-orders/fulfillment/services/console/internal/app"
)

// fakeDLQ holds dead letters by consumer; a consumer in down answers
// nothing.
type fakeDLQ struct {
	items   map[string][]suiteapi.DeadLetter
	down    string
	replays []string
}

func (f *fakeDLQ) DeadLetters(_ context.Context, svc, _, status string) ([]suiteapi.DeadLetter, error) {
	if svc == f.down {
		return nil, errDown
	}
	var out []suiteapi.DeadLetter
	for _, d := range f.items[svc] {
		if status == "" || d.Status == status {
			out = append(out, d)
		}
	}
	return out, nil
}

func (f *fakeDLQ) ReplayWithKey(_ context.Context, svc string, id int64, by, key string) (suiteapi.ReplayResult, error) {
	if svc == f.down {
		return suiteapi.ReplayResult{}, errDown
	}
	f.replays = append(f.replays, svc+" "+by+" "+key)
	return suiteapi.ReplayResult{ID: id, Outcome: "APPLIED"}, nil
}

func TestDeadLetterQueue(t *testing.T) {
	f := &fakeDLQ{down: "notification", items: map[string][]suiteapi.DeadLetter{
		"points":    {{ID: 1, Status: "DEAD", DeadLetteredAt: t0}, {ID: 2, Status: "REPLAYED", DeadLetteredAt: t0.Add(time.Second)}},
		"inventory": {{ID: 1, Status: "DEAD", DeadLetteredAt: t0.Add(2 * time.Second)}},
	}}
	var log bytes.Buffer
	q := app.NewDeadLetterQueue(f, slog.New(slog.NewTextHandler(&log, nil)))
	tests := []struct {
		status     string
		want       []string
		wantUnread string
	}{
		{"", []string{"inventory 1", "points 2", "points 1"}, "notification"},
		{app.StatusDead, []string{"inventory 1", "points 1"}, "notification"},
		{app.StatusReplayed, []string{"points 2"}, "notification"},
	}
	for _, tt := range tests {
		items, unread := q.List(context.Background(), tt.status)
		var got []string
		for _, d := range items {
			got = append(got, d.Service+" "+string(rune('0'+d.ID)))
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("status %q: %v, want %v (newest first)", tt.status, got, tt.want)
		}
		if len(unread) != 1 || unread[0].Service != tt.wantUnread {
			t.Errorf("status %q: unread %v", tt.status, unread)
		}
	}
	if res, err := q.Replay(context.Background(), "points", 1, "alice", "k-1"); err != nil || res.Outcome != "APPLIED" {
		t.Fatalf("replay: %+v %v", res, err)
	}
	if len(f.replays) != 1 || f.replays[0] != "points alice k-1" || !strings.Contains(log.String(), "operator=alice") {
		t.Errorf("replays %v, log %s", f.replays, log.String())
	}
	if _, err := q.Replay(context.Background(), "order", 1, "alice", ""); !errors.Is(err, app.ErrNotAConsumer) {
		t.Errorf("replay at the order service: %v, want ErrNotAConsumer", err)
	}
	if _, err := q.Replay(context.Background(), "notification", 1, "alice", ""); !errors.Is(err, errDown) {
		t.Errorf("replay at a consumer that is down: %v", err)
	}
}
