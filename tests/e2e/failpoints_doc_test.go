package e2e_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/tests/harness"
)

// documentedFailPoints reads the README's "Fail points" table: for each
// service the names its rows list. A row's first column names services
// (a parenthesis adds examples, not services), its second the points in
// backticks.
func documentedFailPoints(t *testing.T) map[string][]string {
	t.Helper()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n### Fail points\n")
	if !ok {
		t.Fatal(`README has no "### Fail points" section`)
	}
	section, _, _ = strings.Cut(section, "\n#")
	names := regexp.MustCompile("`([a-z]+\\.[a-z-]+)`")
	parenthesis := regexp.MustCompile(`\([^)]*\)`)
	out := map[string][]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") || strings.TrimSpace(cells[1]) == "service" {
			continue
		}
		services := strings.Split(parenthesis.ReplaceAllString(cells[1], ""), ",")
		for _, service := range services {
			service = strings.TrimSpace(service)
			if _, seen := out[service]; !seen {
				out[service] = []string{}
			}
			for _, m := range names.FindAllStringSubmatch(cells[2], -1) {
				out[service] = append(out[service], m[1])
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("README's fail point table lists no service")
	}
	return out
}

// checkFailPointsDocumented compares the README's table with what each
// running service declares (GET /admin/failpoints), so a point added,
// renamed or removed in code shows up here until the table follows.
func checkFailPointsDocumented(t *testing.T, s *harness.Suite) {
	t.Helper()
	documented := documentedFailPoints(t)
	for _, service := range harness.Services {
		points, err := s.API().FailPoints(t.Context(), service)
		if err != nil {
			t.Fatalf("%s: %v", service, err)
		}
		var declared []string
		for _, p := range points {
			declared = append(declared, p.Name)
		}
		want, listed := documented[service]
		slices.Sort(declared)
		slices.Sort(want)
		if !listed || !slices.Equal(declared, want) {
			t.Errorf("%s declares fail points %v; README's table lists %v", service, declared, want)
		}
	}
}
