package envconfig_test

import (
	"slices"
	"testing"
	"time"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
)

func TestReader(t *testing.T) {
	env := map[string]string{"N": "7", "D": "250ms", "L": "a, b,,c", "BAD_N": "x", "BAD_D": "5"}
	r := envconfig.New(func(k string) string { return env[k] })

	if got := r.Int("N", 1); got != 7 {
		t.Errorf("Int = %d", got)
	}
	if got := r.Duration("D", time.Second); got != 250*time.Millisecond {
		t.Errorf("Duration = %v", got)
	}
	if got := r.List("L", nil); len(got) != 3 || got[2] != "c" {
		t.Errorf("List = %q", got)
	}
	if got := r.String("MISSING", "def"); got != "def" {
		t.Errorf("String default = %q", got)
	}
	if r.Err() != nil {
		t.Fatalf("unexpected error %v", r.Err())
	}
	r.Int("BAD_N", 1)
	r.Duration("BAD_D", time.Second)
	if err := r.Err(); err == nil {
		t.Fatal("malformed values not reported")
	}
}

func TestURL(t *testing.T) {
	tests := []struct {
		name, value, want string
		ok                bool
	}{
		{"default", "", "http://127.0.0.1:8081", true},
		{"trailing slash trimmed", "https://orders.example/", "https://orders.example", true},
		{"with a path", "http://gateway:80/orders", "http://gateway:80/orders", true},
		{"no scheme", "order-service:8081", "", false},
		{"other scheme", "ftp://orders", "", false},
		{"no host", "http://", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := envconfig.New(func(string) string { return tt.value })
			got := r.URL("ORDER_URL", "http://127.0.0.1:8081")
			if err := r.Err(); (err == nil) != tt.ok {
				t.Fatalf("URL(%q) error %v, want ok %v", tt.value, err, tt.ok)
			}
			if tt.ok && got != tt.want {
				t.Fatalf("URL(%q) = %q, want %q", tt.value, got, tt.want)
			}
		})
	}
}

func TestSplit(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"empty", "", nil},
		{"blank", "  ", nil},
		{"one", "127.0.0.1:9092", []string{"127.0.0.1:9092"}},
		{"trimmed", " a , b ", []string{"a", "b"}},
		{"empty items dropped", "a,,b,", []string{"a", "b"}},
		{"only commas", ",,", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := envconfig.Split(tt.in); !slices.Equal(got, tt.want) {
				t.Errorf("Split(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestBool(t *testing.T) {
	tests := []struct {
		value    string
		def      bool
		want, ok bool
	}{
		{"", false, false, true},
		{"", true, true, true},
		{"true", false, true, true},
		{"1", false, true, true},
		{"FALSE", true, false, true},
		{"yes", false, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			r := envconfig.New(func(string) string { return tt.value })
			got := r.Bool("FAILPOINTS_ENABLED", tt.def)
			if err := r.Err(); (err == nil) != tt.ok {
				t.Fatalf("Bool(%q) error %v, want ok %v", tt.value, err, tt.ok)
			}
			if got != tt.want {
				t.Fatalf("Bool(%q) = %v, want %v", tt.value, got, tt.want)
			}
		})
	}
}
