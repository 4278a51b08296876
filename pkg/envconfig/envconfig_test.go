package envconfig_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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

func TestSecret(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr string // a part of the error; "" for none
	}{
		{"neither set: the default", nil, "def", ""},
		{"the variable", map[string]string{"ADMIN_TOKEN": " tok "}, "tok", ""},
		{"the file", map[string]string{"ADMIN_TOKEN_FILE": file("plain", "from-file")}, "from-file", ""},
		{"one trailing newline removed", map[string]string{"ADMIN_TOKEN_FILE": file("lf", "from-file\n")}, "from-file", ""},
		{"a trailing CRLF removed", map[string]string{"ADMIN_TOKEN_FILE": file("crlf", "from-file\r\n")}, "from-file", ""},
		{"only one newline removed", map[string]string{"ADMIN_TOKEN_FILE": file("lflf", "from-file\n\n")}, "from-file\n", ""},
		{"inner and leading whitespace kept", map[string]string{"ADMIN_TOKEN_FILE": file("ws", " a b\n")}, " a b", ""},
		{"the path trimmed", map[string]string{"ADMIN_TOKEN_FILE": " " + file("path", "p") + " "}, "p", ""},
		{"both set", map[string]string{"ADMIN_TOKEN": "tok", "ADMIN_TOKEN_FILE": file("both", "f")}, "def", "ADMIN_TOKEN and ADMIN_TOKEN_FILE are both set"},
		{"a missing file", map[string]string{"ADMIN_TOKEN_FILE": filepath.Join(dir, "missing")}, "def", "ADMIN_TOKEN_FILE=" + strconv.Quote(filepath.Join(dir, "missing"))},
		{"a directory", map[string]string{"ADMIN_TOKEN_FILE": dir}, "def", "ADMIN_TOKEN_FILE="},
		{"an empty file", map[string]string{"ADMIN_TOKEN_FILE": file("empty", "")}, "def", "the file is empty"},
		{"a file of one newline", map[string]string{"ADMIN_TOKEN_FILE": file("nl", "\n")}, "def", "the file is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := envconfig.New(func(k string) string { return tt.env[k] })
			got := r.Secret("ADMIN_TOKEN", "def")
			err := r.Err()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Secret error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Secret error %v, want one saying %q", err, tt.wantErr)
			}
			if got != tt.want {
				t.Fatalf("Secret = %q, want %q", got, tt.want)
			}
		})
	}
}

// A secret's value is never in the error, whatever went wrong.
func TestSecretErrorHidesTheValue(t *testing.T) {
	env := map[string]string{"CALLBACK_SECRET": "s3cr3t-value", "CALLBACK_SECRET_FILE": "/nonexistent/secret"}
	r := envconfig.New(func(k string) string { return env[k] })
	r.Secret("CALLBACK_SECRET", "")
	if err := r.Err(); err == nil || strings.Contains(err.Error(), "s3cr3t-value") {
		t.Fatalf("error %v: want one, without the value", err)
	}
}

func TestSecretList(t *testing.T) {
	path := filepath.Join(t.TempDir(), "previous")
	if err := os.WriteFile(path, []byte("old-1, old-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"unset", nil, []string{"def"}},
		{"the variable", map[string]string{"CALLBACK_SECRET_PREVIOUS": "a,b"}, []string{"a", "b"}},
		{"the file", map[string]string{"CALLBACK_SECRET_PREVIOUS_FILE": path}, []string{"old-1", "old-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := envconfig.New(func(k string) string { return tt.env[k] })
			if got := r.SecretList("CALLBACK_SECRET_PREVIOUS", []string{"def"}); !slices.Equal(got, tt.want) || r.Err() != nil {
				t.Fatalf("SecretList = %q (error %v), want %q", got, r.Err(), tt.want)
			}
		})
	}
}
