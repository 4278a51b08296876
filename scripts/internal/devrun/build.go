package devrun

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/internal/suite"
)

// Build runs `go build -o <binDir>/<name>-service ./services/<name>` in dir
// for each service, one after the other (the go command already uses every
// core). The first failure stops it with the compiler's output in the error.
func Build(ctx context.Context, dir, binDir string, services []suite.Service, progress io.Writer) error {
	for _, s := range services {
		start := time.Now()
		bin := filepath.Join(binDir, s.FullName())
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, s.Package())
		cmd.Dir = dir
		output, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("build %s (go build -o %s %s): %w\n%s",
				s.FullName(), bin, s.Package(), err, strings.TrimSpace(string(output)))
		}
		fmt.Fprintf(progress, "built %s in %s\n", bin, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
