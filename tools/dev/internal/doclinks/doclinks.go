// Package doclinks checks that the repository's documentation stands on its
// own, so a fork or a clean clone reads the same as the original: every
// relative link of every Markdown file leads to a file (and, for a link to
// a Markdown file with an #anchor, to a heading) inside the repository, and
// no file refers to material kept outside it; and every test the
// documentation names exists.
//
// Each Check function returns every problem it finds, so one run lists them
// all.
package doclinks

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"unicode"
)

// Repo is the set of files a check reads: the repository's tracked files,
// by slash-separated path relative to Root.
type Repo struct {
	Root  string
	Files []string
	files map[string]bool
	dirs  map[string]bool
}

// skipped are the directories a walk of an untracked tree leaves out: git's
// own, and what make run, make build and tools leave behind.
var skipped = map[string]bool{".git": true, ".data": true, "bin": true, "node_modules": true}

// Load lists the files git tracks under root (git ls-files), so local
// leftovers can neither satisfy nor break a link; without git, or outside a
// work tree, it walks root instead, leaving out the skipped directories.
// Files listed but missing from the work tree (deleted, not yet committed)
// are left out.
func Load(root string) (*Repo, error) {
	cmd := exec.Command("git", "-C", root, "ls-files", "-z")
	out, err := cmd.Output()
	if err != nil {
		return Walk(root)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(f))); err == nil {
			files = append(files, f)
		}
	}
	return NewRepo(root, files), nil
}

// Walk lists every regular file under root except those in the skipped
// directories.
func Walk(root string) (*Repo, error) {
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root && skipped[d.Name()] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // a worktree's .git is a file
		}
		if d.Type().IsRegular() {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", root, err)
	}
	return NewRepo(root, files), nil
}

// NewRepo returns the repository at root holding files (slash-separated,
// relative to root).
func NewRepo(root string, files []string) *Repo {
	r := &Repo{Root: root, Files: slices.Sorted(slices.Values(files)),
		files: map[string]bool{}, dirs: map[string]bool{".": true}}
	for _, f := range r.Files {
		r.files[f] = true
		for d := path.Dir(f); d != "."; d = path.Dir(d) {
			r.dirs[d] = true
		}
	}
	return r
}

func (r *Repo) read(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(r.Root, filepath.FromSlash(name)))
}

// Markdown returns the repository's Markdown files.
func (r *Repo) Markdown() []string {
	var md []string
	for _, f := range r.Files {
		if strings.EqualFold(path.Ext(f), ".md") {
			md = append(md, f)
		}
	}
	return md
}

// CheckLinks checks every relative link of every Markdown file: its target
// must be a file or a directory of the repository, inside the repository,
// and an anchor must name a heading of the Markdown file it points into
// (or of the same file, for a link that is only an anchor). Links with a
// scheme (https:, mailto:, ...) are not followed.
func (r *Repo) CheckLinks() []error {
	var errs []error
	anchors := map[string]map[string]bool{}
	anchorsOf := func(name string) (map[string]bool, error) {
		if a, ok := anchors[name]; ok {
			return a, nil
		}
		data, err := r.read(name)
		if err != nil {
			return nil, err
		}
		anchors[name] = Anchors(data)
		return anchors[name], nil
	}
	for _, name := range r.Markdown() {
		data, err := r.read(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, l := range Links(data) {
			if err := r.checkLink(name, l, anchorsOf); err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: link %q: %w", name, l.Line, l.Target, err))
			}
		}
	}
	return errs
}

var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

func (r *Repo) checkLink(from string, l Link, anchorsOf func(string) (map[string]bool, error)) error {
	if scheme.MatchString(l.Target) {
		return nil
	}
	target, anchor, _ := strings.Cut(l.Target, "#")
	target, _, _ = strings.Cut(target, "?")
	target, err := url.PathUnescape(target)
	if err != nil {
		return fmt.Errorf("not a path: %w", err)
	}
	anchor, err = url.PathUnescape(anchor)
	if err != nil {
		return fmt.Errorf("not an anchor: %w", err)
	}
	resolved := from
	if target != "" {
		if strings.HasPrefix(target, "/") {
			return errors.New("absolute path: write it relative to the file")
		}
		resolved = path.Join(path.Dir(from), target)
		if resolved == ".." || strings.HasPrefix(resolved, "../") {
			return errors.New("resolves outside the repository")
		}
		if !r.files[resolved] && !r.dirs[resolved] {
			return fmt.Errorf("%s is not a file of the repository", resolved)
		}
	}
	if anchor == "" || !r.files[resolved] || !strings.EqualFold(path.Ext(resolved), ".md") {
		return nil
	}
	a, err := anchorsOf(resolved)
	if err != nil {
		return err
	}
	if !a[strings.ToLower(anchor)] {
		return fmt.Errorf("no heading of %s has the anchor #%s", resolved, anchor)
	}
	return nil
}

// CheckReferences fails for every line of every file of the repository
// that contains one of needles; binary files are skipped.
func (r *Repo) CheckReferences(needles []string) []error {
	var errs []error
	for _, name := range r.Files {
		data, err := r.read(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if bytes.IndexByte(data[:min(len(data), 8000)], 0) >= 0 {
			continue
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, n := range needles {
				if strings.Contains(line, n) {
					errs = append(errs, fmt.Errorf("%s:%d: refers to %q, which is not in the repository", name, i+1, n))
				}
			}
		}
	}
	return errs
}

// citedTest matches a Go test, benchmark or fuzz target named in prose,
// e.g. `TestGuard` or TestDrills/loss/rollback (the part before the slash).
var citedTest = regexp.MustCompile(`\b((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)`)

// declaredTest matches the declaration of one in a _test.go file.
var declaredTest = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz)[A-Z][A-Za-z0-9_]*)\(`)

// CheckCitedTests fails for every test, benchmark or fuzz target a
// Markdown file names that no _test.go file of the repository declares:
// the docs point readers at tests as evidence, so a renamed or removed one
// must not leave a dangling name behind.
func (r *Repo) CheckCitedTests() []error {
	declared := map[string]bool{}
	var errs []error
	for _, name := range r.Files {
		if !strings.HasSuffix(name, "_test.go") {
			continue
		}
		data, err := r.read(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, m := range declaredTest.FindAllSubmatch(data, -1) {
			declared[string(m[1])] = true
		}
	}
	for _, name := range r.Markdown() {
		data, err := r.read(name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i, line := range strings.Split(string(data), "\n") {
			for _, m := range citedTest.FindAllStringSubmatch(line, -1) {
				if !declared[m[1]] {
					errs = append(errs, fmt.Errorf("%s:%d: names %s, which no _test.go file declares", name, i+1, m[1]))
				}
			}
		}
	}
	return errs
}

// Link is one link of a Markdown file.
type Link struct {
	Line   int
	Target string
}

var (
	// inline matches the destination of [text](dest) and ![alt](dest),
	// with an optional "title"; <dest> may hold spaces.
	inline = regexp.MustCompile(`\]\(\s*(?:<([^>]*)>|([^\s)]*))(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)`)
	// reference matches a link reference definition: [label]: dest
	reference = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(?:<([^>]*)>|(\S+))`)
	fence     = regexp.MustCompile("^ {0,3}(```|~~~)")
)

// Links returns the inline links, images and link reference definitions of
// a Markdown document, leaving out code blocks and code spans, where a
// bracket is only text.
func Links(md []byte) []Link {
	var links []Link
	forEachProseLine(md, func(n int, line string) {
		line = withoutCodeSpans(line)
		if m := reference.FindStringSubmatch(line); m != nil {
			links = append(links, Link{Line: n, Target: m[1] + m[2]})
			return
		}
		for _, m := range inline.FindAllStringSubmatch(line, -1) {
			if t := m[1] + m[2]; t != "" {
				links = append(links, Link{Line: n, Target: t})
			}
		}
	})
	return links
}

// forEachProseLine calls f with each line (numbered from 1) outside fenced
// code blocks.
func forEachProseLine(md []byte, f func(n int, line string)) {
	var open string // the fence that opened the current code block
	for i, line := range strings.Split(string(md), "\n") {
		if m := fence.FindStringSubmatch(line); m != nil {
			switch {
			case open == "":
				open = m[1]
			case m[1] == open:
				open = ""
			}
			continue
		}
		if open == "" {
			f(i+1, line)
		}
	}
}

// withoutCodeSpans removes `code spans` (delimited by equal runs of
// backticks) from a line.
func withoutCodeSpans(line string) string {
	var b strings.Builder
	for {
		start := strings.IndexByte(line, '`')
		if start < 0 {
			b.WriteString(line)
			return b.String()
		}
		run := len(line[start:]) - len(strings.TrimLeft(line[start:], "`"))
		delim := line[start : start+run]
		end := strings.Index(line[start+run:], delim)
		if end < 0 {
			b.WriteString(line)
			return b.String()
		}
		b.WriteString(line[:start])
		line = line[start+run+end+run:]
	}
}

var (
	heading    = regexp.MustCompile(`^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$`)
	headedLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// Anchors returns the anchors of a Markdown document's headings as GitHub
// makes them (Slug), a repeated heading's with -1, -2, ... appended.
func Anchors(md []byte) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	forEachProseLine(md, func(_ int, line string) {
		m := heading.FindStringSubmatch(line)
		if m == nil {
			return
		}
		slug := Slug(m[1])
		if n := seen[slug]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	})
	return anchors
}

// Slug is the anchor GitHub gives a heading: lower case, every character
// other than a letter, a digit, an underscore, a hyphen or a space left
// out, and each space made a hyphen. Markdown links in the heading count
// by their text.
func Slug(h string) string {
	h = headedLink.ReplaceAllString(h, "$1")
	var b strings.Builder
	for _, c := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case c == ' ':
			b.WriteByte('-')
		case c == '-' || unicode.IsLetter(c) || unicode.IsNumber(c) || unicode.IsMark(c) || unicode.Is(unicode.Pc, c):
			b.WriteRune(c)
		}
	}
	return b.String()
}
