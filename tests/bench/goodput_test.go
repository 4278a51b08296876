package bench_test

import (
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/tests/bench"
)

func TestGoodput(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name  string
		steps []bench.Step
		want  bench.Curve
	}{
		{name: "no steps", want: bench.Curve{}},
		{
			name: "no rate qualifies: too few accepted, or too slow",
			steps: []bench.Step{
				{Rate: 25, Offered: 1000, Accepted: 989, Goodput: 24.7, P99: 100 * ms},
				{Rate: 50, Offered: 1000, Accepted: 1000, Goodput: 50, P99: 501 * ms},
			},
			want: bench.Curve{},
		},
		{
			name: "exactly 99 % accepted and p99 exactly 500 ms qualify",
			steps: []bench.Step{
				{Rate: 100, Offered: 1000, Accepted: 990, Goodput: 99, P99: 500 * ms},
			},
			want: bench.Curve{Knee: 100, KneeGoodput: 99},
		},
		{
			name: "the highest qualifying rate, even above one that missed; unsorted",
			steps: []bench.Step{
				{Rate: 400, Offered: 1000, Accepted: 700, Goodput: 280, P99: 450 * ms},
				{Rate: 100, Offered: 1000, Accepted: 1000, Goodput: 100, P99: 600 * ms},
				{Rate: 200, Offered: 1000, Accepted: 995, Goodput: 199, P99: 300 * ms},
				{Rate: 50, Offered: 1000, Accepted: 1000, Goodput: 50, P99: 80 * ms},
			},
			want: bench.Curve{Knee: 200, KneeGoodput: 199, TwiceKnee: 400, TwiceKneeRatio: 280.0 / 199,
				PastKnee: true, MinPastKneeRatio: 280.0 / 199},
		},
		{
			name: "collapse: goodput past the knee falls; twice the knee is the lowest rate at or above it",
			steps: []bench.Step{
				{Rate: 100, Offered: 1000, Accepted: 1000, Goodput: 100, P99: 200 * ms},
				{Rate: 150, Offered: 1000, Accepted: 800, Goodput: 95, P99: 700 * ms},
				{Rate: 250, Offered: 1000, Accepted: 300, Goodput: 60, P99: 900 * ms},
				{Rate: 800, Offered: 1000, Accepted: 50, Goodput: 30, P99: 900 * ms},
			},
			want: bench.Curve{Knee: 100, KneeGoodput: 100, TwiceKnee: 250, TwiceKneeRatio: 0.6,
				PastKnee: true, MinPastKneeRatio: 0.3},
		},
		{
			name: "no rate at twice the knee: the ratio past it only",
			steps: []bench.Step{
				{Rate: 200, Offered: 1000, Accepted: 1000, Goodput: 200, P99: 100 * ms},
				{Rate: 300, Offered: 1000, Accepted: 900, Goodput: 270, P99: 400 * ms},
			},
			want: bench.Curve{Knee: 200, KneeGoodput: 200, PastKnee: true, MinPastKneeRatio: 1.35},
		},
		{
			name: "an offered rate with no order started does not qualify",
			steps: []bench.Step{
				{Rate: 100, Offered: 0, Accepted: 0},
			},
			want: bench.Curve{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bench.Goodput(tt.steps); got != tt.want {
				t.Errorf("Goodput() = %+v, want %+v", got, tt.want)
			}
		})
	}
}
