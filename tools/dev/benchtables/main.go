// Command benchtables writes the generated block of docs/benchmarks.md's
// "Latest figures" from raw `go test -bench` output files committed under
// docs/benchmarks/, and the charts it links (a sweep's goodput curve, an
// SVG file beside its raw file). `make bench` runs it on the file it has
// just written:
//
//	go run ./tools/dev/benchtables docs/benchmarks/2026-12-01T2300-make-bench.txt
//	go run ./tools/dev/benchtables           # again from the files the block names
//	go run ./tools/dev/benchtables --check   # fail when the block or a chart is not what they give
//
// Paths are relative to --root, the repository root (the current directory
// by default, as make runs it).
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/reliable-orders/fulfillment/tools/dev/internal/benchtables"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchtables:", err)
		os.Exit(1)
	}
}

// errStale is a generated block or chart that differs from what its raw
// files give.
var errStale = errors.New("differs from what its raw files give: run go run ./tools/dev/benchtables")

func run(_ context.Context, args []string, stdout io.Writer) error {
	flags := flag.NewFlagSet("benchtables", flag.ContinueOnError)
	flags.SetOutput(stdout)
	root := flags.String("root", ".", "the repository root the paths are relative to")
	doc := flags.String("doc", "docs/benchmarks.md", "the document holding the generated block")
	check := flags.Bool("check", false, "only check that the block and its charts are what their raw files give")
	if err := flags.Parse(args); err != nil {
		return fmt.Errorf("parse flags: %w", err)
	}
	if *check && flags.NArg() > 0 {
		return errors.New("--check takes no raw files: it reads those the block names")
	}
	out, charts, err := benchtables.Regenerate(*root, *doc, flags.Args())
	if err != nil {
		return fmt.Errorf("regenerate: %w", err)
	}
	files := append([]benchtables.File{{Path: *doc, Data: out}}, charts...)
	for _, f := range files {
		if err := update(*root, f, *check, stdout); err != nil {
			return err
		}
	}
	return nil
}

// update writes f under root unless it already holds f's bytes; with
// check it only reports that it does not.
func update(root string, f benchtables.File, check bool, stdout io.Writer) error {
	name := filepath.Join(root, filepath.FromSlash(f.Path))
	current, err := os.ReadFile(name)
	switch {
	case err == nil && bytes.Equal(current, f.Data):
		fmt.Fprintf(stdout, "%s: up to date\n", f.Path)
		return nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read %s: %w", f.Path, err)
	case check:
		return fmt.Errorf("%s: %w", f.Path, errStale)
	}
	if err := os.WriteFile(name, f.Data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	fmt.Fprintf(stdout, "%s: written\n", f.Path)
	return nil
}
