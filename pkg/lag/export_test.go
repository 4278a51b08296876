package lag

import "math"

// Quantile exposes the bucket interpolation to the table test: uppers are
// the finite bucket bounds, counts the cumulative counts of those buckets
// followed by the total (the +Inf bucket).
func Quantile(q float64, uppers, counts []float64) float64 {
	var bs []bucket
	for i, u := range uppers {
		bs = append(bs, bucket{upper: u, count: counts[i]})
	}
	return quantile(q, append(bs, bucket{upper: math.Inf(1), count: counts[len(counts)-1]}))
}
