package drill

import (
	"strings"
	"testing"
)

func TestSumSamples(t *testing.T) {
	const exposition = `# HELP consumer_messages_total Messages handled, by outcome.
# TYPE consumer_messages_total counter
consumer_messages_total{consumer="inventory-service",outcome="ok"} 12
consumer_messages_total{consumer="inventory-service",outcome="error"} 3
consumer_messages_total_created{consumer="inventory-service",outcome="ok"} 1.7e+09
consumer_retries_total{consumer="inventory-service"} 2
consumer_retries_total 5
`
	tests := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"consumer_messages_total", map[string]string{"outcome": "ok"}, 12},
		{"consumer_messages_total", nil, 15},
		{"consumer_messages_total", map[string]string{"outcome": "rejected"}, 0},
		{"consumer_retries_total", nil, 7},
		{"consumer_dead_letters_total", nil, 0},
	}
	for _, tt := range tests {
		got, err := sumSamples(strings.NewReader(exposition), tt.name, tt.labels)
		if err != nil || got != tt.want {
			t.Errorf("sumSamples(%s, %v) = %v, %v; want %v", tt.name, tt.labels, got, err, tt.want)
		}
	}
	if _, err := sumSamples(strings.NewReader("consumer_retries_total{a=\"b\"} many\n"), "consumer_retries_total", nil); err == nil {
		t.Error("a value that is not a number was accepted")
	}
}
