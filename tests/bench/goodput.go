package bench

import "time"

// The knee's bounds (docs/benchmarks.md, The goodput curve): an offered
// rate is within the suite's capacity when at least KneeAccepted of its
// orders are accepted and their pay → converged p99 is at most KneeP99.
const (
	KneeAccepted = 0.99
	KneeP99      = 500 * time.Millisecond
)

// Step is what one offered rate of a sweep did.
type Step struct {
	// Rate is the offered orders a second.
	Rate int
	// Offered is how many orders were started, Accepted how many were
	// paid.
	Offered, Accepted int
	// Goodput is the accepted orders a second.
	Goodput float64
	// P99 is the accepted orders' pay → converged p99.
	P99 time.Duration
}

// Curve is what a sweep says of overload.
type Curve struct {
	// Knee is the highest offered rate with at least KneeAccepted of its
	// orders accepted and an accepted p99 of at most KneeP99; 0 when no
	// rate qualifies. KneeGoodput is that rate's goodput.
	Knee        int
	KneeGoodput float64
	// TwiceKnee is the lowest offered rate at or above twice the knee,
	// and TwiceKneeRatio its goodput ÷ KneeGoodput; TwiceKnee is 0 when
	// there is no knee or no such rate was offered.
	TwiceKnee      int
	TwiceKneeRatio float64
	// PastKnee tells whether a rate above the knee was offered; then
	// MinPastKneeRatio is the lowest goodput of those rates ÷
	// KneeGoodput: below 1 is goodput lost to overload, and congestion
	// collapse is a ratio that keeps falling as the rate grows.
	PastKnee         bool
	MinPastKneeRatio float64
}

// Goodput finds the knee of steps and how goodput holds past it. The
// steps need not be sorted.
func Goodput(steps []Step) Curve {
	var c Curve
	for _, st := range steps {
		if st.Offered > 0 && float64(st.Accepted) >= KneeAccepted*float64(st.Offered) &&
			st.Accepted > 0 && st.P99 <= KneeP99 && st.Rate > c.Knee {
			c.Knee, c.KneeGoodput = st.Rate, st.Goodput
		}
	}
	if c.Knee == 0 || c.KneeGoodput <= 0 {
		return Curve{Knee: c.Knee, KneeGoodput: c.KneeGoodput}
	}
	for _, st := range steps {
		if st.Rate <= c.Knee {
			continue
		}
		ratio := st.Goodput / c.KneeGoodput
		if !c.PastKnee || ratio < c.MinPastKneeRatio {
			c.PastKnee, c.MinPastKneeRatio = true, ratio
		}
		if st.Rate >= 2*c.Knee && (c.TwiceKnee == 0 || st.Rate < c.TwiceKnee) {
			c.TwiceKnee, c.TwiceKneeRatio = st.Rate, ratio
		}
	}
	return c
}
