// Command benchtables writes the generated block of docs/benchmarks.md's
// "Latest figures" from raw `go test -bench` output files committed under
// docs/benchmarks/. `make bench` runs it on the file it has just written:
//
//	go run ./tools/dev/benchtables docs/benchmarks/2026-12-01T2300-make-bench.txt
//	go run ./tools/dev/benchtables           # again from the files the block names
//	go run ./tools/dev/benchtables --check   # fail when the block is not what they give
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

// errStale is a generated block that differs from what its raw files give.
var errStale = errors.New("the generated block differs from its raw files: run go run ./tools/dev/benchtables")

func run(_ context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("benchtables", flag.ContinueOnError)
	fs.SetOutput(stdout)
	root := fs.String("root", ".", "the repository root the paths are relative to")
	doc := fs.String("doc", "docs/benchmarks.md", "the document holding the generated block")
	check := fs.Bool("check", false, "only check that the block is what its raw files give")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("parse flags: %w", err)
	}
	if *check && fs.NArg() > 0 {
		return errors.New("--check takes no raw files: it reads those the block names")
	}
	out, err := benchtables.Regenerate(*root, *doc, fs.Args())
	if err != nil {
		return fmt.Errorf("regenerate: %w", err)
	}
	docPath := filepath.Join(*root, filepath.FromSlash(*doc))
	current, err := os.ReadFile(docPath)
	if err != nil {
		return fmt.Errorf("read the document: %w", err)
	}
	switch {
	case bytes.Equal(current, out):
		fmt.Fprintf(stdout, "%s: the generated block is up to date\n", *doc)
		return nil
	case *check:
		return fmt.Errorf("%s: %w", *doc, errStale)
	}
	if err := os.WriteFile(docPath, out, 0o644); err != nil {
		return fmt.Errorf("write the document: %w", err)
	}
	fmt.Fprintf(stdout, "%s: wrote the generated block\n", *doc)
	return nil
}
