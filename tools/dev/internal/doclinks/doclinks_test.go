package doclinks_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/reliable-orders/fulfillment/tools/dev/internal/doclinks"
)

// outside are the strings that point at material the repository does not
// hold: the folder next to the repository and the section numbers of a
// design page that lives there (also as JSON escapes it). They are built
// here so that this file does not contain them itself.
var outside = []string{
	".." + "/shared",
	"DESIGN" + " \u00a7",
	"DESIGN" + ` \` + "u00a7",
	"DESIGN" + ".md",
}

// repoRoot is the directory of go.work above the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
}

func loadRepo(t *testing.T) *doclinks.Repo {
	t.Helper()
	r, err := doclinks.Load(repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Markdown()) == 0 {
		t.Fatal("no Markdown file found in the repository")
	}
	return r
}

// TestMarkdownLinksResolve follows every relative link of every tracked
// Markdown file.
func TestMarkdownLinksResolve(t *testing.T) {
	for _, err := range loadRepo(t).CheckLinks() {
		t.Error(err)
	}
}

// TestNothingPointsOutsideTheRepository fails for any tracked file that
// refers to material kept next to the repository rather than in it.
func TestNothingPointsOutsideTheRepository(t *testing.T) {
	for _, err := range loadRepo(t).CheckReferences(outside) {
		t.Error(err)
	}
}

// TestCitedTestsExist fails for a test the docs name that no longer exists.
func TestCitedTestsExist(t *testing.T) {
	for _, err := range loadRepo(t).CheckCitedTests() {
		t.Error(err)
	}
}

// fixture writes files into a fresh directory (not a git work tree, so Load
// walks it) and loads it.
func fixture(t *testing.T, files map[string]string) *doclinks.Repo {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := doclinks.Walk(root)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestChecksCatchBreakage gives the checks one broken document at a time
// and expects each to say what broke, and where.
func TestChecksCatchBreakage(t *testing.T) {
	base := map[string]string{
		"README.md":            "# Suite\n\n## Configuration\n\nSee [the design](docs/design.md#outbox).\n",
		"docs/design.md":       "# Design\n\n## Outbox\n\n## Inbox and deduplication\n",
		"docs/decisions.md":    "# Decisions\n",
		"services/a/main.go":   "package main\n",
		"services/a/a_test.go": "package main\n\nfunc TestKept(t *testing.T) {}\n",
	}
	tests := []struct {
		name, file, body string
		want             string // in the one error; empty: no error
	}{
		{"a good document", "docs/x.md", "[d](design.md) [c](../README.md#configuration) [s](../services/a/) [h](#x)\n# X\n", ""},
		{"links in code are text", "docs/x.md", "```\n[a](missing.md)\n```\n`[b](missing.md)`\n", ""},
		{"web and mail links are not followed", "docs/x.md", "[w](https://example.com/x.md) [m](mailto:a@example.com)\n", ""},
		{"a missing file", "docs/x.md", "text\n[c](configuration.md)\n", `docs/x.md:2: link "configuration.md": docs/configuration.md is not a file`},
		{"a path that leaves the repository", "docs/x.md", "[s](../../elsewhere/notes.md)\n", "resolves outside the repository"},
		{"an absolute path", "docs/x.md", "[s](/etc/passwd)\n", "absolute path"},
		{"a missing heading", "docs/x.md", "[o](design.md#relay)\n", "no heading of docs/design.md has the anchor #relay"},
		{"a missing heading of the same file", "docs/x.md", "# X\n[o](#y)\n", "no heading of docs/x.md has the anchor #y"},
		{"a reference definition", "docs/x.md", "[o][1]\n\n[1]: gone.md\n", `link "gone.md"`},
		{"an image", "docs/x.md", "![chart](chart.png)\n", "docs/chart.png is not a file"},
		{"a reference outside", "services/a/main.go", "// see " + outside[0] + "/seeds\npackage main\n", "services/a/main.go:1: refers to"},
		{"a design section number", "docs/x.md", "as " + outside[1] + "5 says\n", "docs/x.md:1: refers to"},
		{"a cited test that exists", "docs/x.md", "`services/a TestKept`, TestKept/sub\n", ""},
		{"a cited test that is gone", "docs/x.md", "see `TestRenamed`\n", "docs/x.md:1: names TestRenamed, which no _test.go file declares"},
		{"an escaped one", "pkg/t.json", `{"title": "` + outside[2] + `3"}` + "\n", "pkg/t.json:1: refers to"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			for k, v := range base {
				files[k] = v
			}
			files[tc.file] = tc.body
			r := fixture(t, files)
			errs := append(append(r.CheckLinks(), r.CheckReferences(outside)...), r.CheckCitedTests()...)
			if tc.want == "" {
				for _, err := range errs {
					t.Error(err)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Errorf("errors %v, want one containing %q", errs, tc.want)
			}
		})
	}
}

// TestLoadSkipsLeftovers: without git, a walk leaves out git's own files
// and what the runner and builds leave behind.
func TestLoadSkipsLeftovers(t *testing.T) {
	r := fixture(t, map[string]string{
		"README.md": "# R\n", ".git": "gitdir: elsewhere\n", ".data/broker/x.md": "[x](nowhere.md)\n",
		"bin/notes.md": "x\n", "docs/a.md": "# A\n",
	})
	if want := []string{"README.md", "docs/a.md"}; !slices.Equal(r.Files, want) {
		t.Errorf("files %v, want %v", r.Files, want)
	}
}

func TestSlug(t *testing.T) {
	tests := map[string]string{
		"Drills and the `make run` control API":    "drills-and-the-make-run-control-api",
		"The tutorial, mapped to code and tests":   "the-tutorial-mapped-to-code-and-tests",
		"Exercise 1 — duplicates: the consumer":    "exercise-1--duplicates-the-consumer",
		"Scaling a consumer: the control API":      "scaling-a-consumer-the-control-api",
		"The load alone: `scripts/publish_orders`": "the-load-alone-scriptspublish_orders",
		"消息队列 与 Outbox":                            "消息队列-与-outbox",
		"See [the design](design.md) ":             "see-the-design",
		"Walk-through (after `make run`)":          "walk-through-after-make-run",
	}
	for in, want := range tests {
		if got := doclinks.Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAnchorsNumberRepeatedHeadings(t *testing.T) {
	got := doclinks.Anchors([]byte("# A\n## Notes\n```\n# not a heading\n```\n### Notes\n## Notes ##\n"))
	for _, want := range []string{"a", "notes", "notes-1", "notes-2"} {
		if !got[want] {
			t.Errorf("anchors %v lack %q", got, want)
		}
	}
	if got["not-a-heading"] {
		t.Error("a line in a code block was taken for a heading")
	}
}
