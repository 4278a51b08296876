package devrun

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// Build runs `go build -o <binDir>/<name>-service ./services/<name>` in dir
// for each service, one after the other (the go command already uses every
// core). The first failure stops it with the compiler's output in the error.
func Build(ctx context.Context, dir, binDir string, services []suite.Service, progress io.Writer) error {
	for _, s := range services {
		if err := build(ctx, dir, filepath.Join(binDir, s.FullName()), s.Package(), progress); err != nil {
			return err
		}
	}
	return nil
}

// build runs `go build -o bin pkg` in dir.
func build(ctx context.Context, dir, bin, pkg string, progress io.Writer) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg)
	cmd.Dir = dir
	output, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("build %s (go build -o %s %s): %w\n%s",
			filepath.Base(bin), bin, pkg, err, strings.TrimSpace(string(output)))
	}
	fmt.Fprintf(progress, "built %s in %s\n", bin, time.Since(start).Round(time.Millisecond))
	return nil
}
