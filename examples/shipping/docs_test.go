package main_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// walkThrough is the page that builds this module step by step and quotes
// it; the tests below keep the two in step.
const walkThrough = "../../docs/adding-a-consumer.md"

// The page marks what it quotes: a code block whose first line is a
// comment naming a file of the module, and table rows that link a file of
// the module and give its line count.
var (
	quoteHeader = regexp.MustCompile(`^(?://|--) examples/shipping/(\S+)$`)
	elision     = regexp.MustCompile(`^\s*(?://|--) \.\.\.$`)
	countRow    = regexp.MustCompile("^\\| \\[`([^`]+)`\\]\\(\\.\\./examples/shipping/([^)]+)\\) \\| (\\d+) \\|")
)

func readLines(t *testing.T, path string) []string {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
}

// quote is one excerpt of the page: the file it names and its runs of
// consecutive lines (an elision line separates two runs).
type quote struct {
	file string
	runs [][]string
}

func quotes(t *testing.T) []quote {
	t.Helper()
	var out []quote
	var cur *quote
	inBlock, first := false, false
	for _, line := range readLines(t, walkThrough) {
		switch {
		case strings.HasPrefix(line, "```"):
			if inBlock && cur != nil {
				out = append(out, *cur)
			}
			inBlock, first, cur = !inBlock, !inBlock, nil
		case !inBlock:
		case first:
			first = false
			if m := quoteHeader.FindStringSubmatch(line); m != nil {
				cur = &quote{file: m[1], runs: [][]string{nil}}
			}
		case cur == nil:
		case elision.MatchString(line):
			cur.runs = append(cur.runs, nil)
		default:
			cur.runs[len(cur.runs)-1] = append(cur.runs[len(cur.runs)-1], line)
		}
	}
	return out
}

// TestWalkThroughQuotesTheModule: every excerpt of the page is in the file
// it names, each run of lines as it is there, in the page's order.
func TestWalkThroughQuotesTheModule(t *testing.T) {
	qs := quotes(t)
	if len(qs) < 10 {
		t.Fatalf("found %d excerpts in %s, want the walk-through's", len(qs), walkThrough)
	}
	for _, q := range qs {
		lines := readLines(t, q.file)
		at := 0
		for _, run := range q.runs {
			i := index(lines[at:], run)
			if i < 0 {
				t.Errorf("%s quotes %s, which has no longer (or not after the previous excerpt's run) these lines:\n%s",
					walkThrough, q.file, strings.Join(run, "\n"))
				break
			}
			at += i + len(run)
		}
	}
}

// index is where run starts in lines, or -1.
func index(lines, run []string) int {
	for i := 0; i+len(run) <= len(lines); i++ {
		if slices.Equal(lines[i:i+len(run)], run) {
			return i
		}
	}
	return -1
}

// TestWalkThroughCountsEveryFile: the page's tables give every Go and SQL
// file of the module with its real line count (wc -l).
func TestWalkThroughCountsEveryFile(t *testing.T) {
	counted := map[string]bool{}
	for _, line := range readLines(t, walkThrough) {
		m := countRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if m[1] != m[2] {
			t.Errorf("row names %s but links %s", m[1], m[2])
		}
		want, _ := strconv.Atoi(m[3])
		if got := len(readLines(t, m[2])); got != want {
			t.Errorf("%s has %d lines, the page says %d", m[2], got, want)
		}
		counted[m[2]] = true
	}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(path); (ext == ".go" || ext == ".sql") && !counted[filepath.ToSlash(path)] {
			t.Errorf("%s is not in the page's tables", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
