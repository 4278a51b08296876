package drill

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// sumSamples sums the samples of metric name in a Prometheus text
// exposition whose labels include every pair of labels. It reads the plain
// `name{labels} value` lines a counter or gauge is written as, which is all
// the drills need, without a Prometheus client library.
func sumSamples(r io.Reader, name string, labels map[string]string) (float64, error) {
	sum := 0.0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		var labelText string
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndex(rest, "}")
			if end < 0 {
				return 0, fmt.Errorf("metric line %q: unclosed labels", line)
			}
			labelText, rest = rest[1:end], rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // another metric whose name starts with name
		}
		if !hasLabels(labelText, labels) {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return 0, fmt.Errorf("metric line %q: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read metrics: %w", err)
	}
	return sum, nil
}

// hasLabels reports whether the label text (`a="1",b="2"`) holds every
// pair of want. Label values of the suite's metrics hold no commas or
// quotes, so a split is enough.
func hasLabels(text string, want map[string]string) bool {
	got := map[string]string{}
	for _, pair := range strings.Split(text, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
		if ok {
			got[k] = strings.Trim(v, `"`)
		}
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
