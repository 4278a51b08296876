// Package cli is what the annex's commands share around their run
// function: the context that ends on Ctrl-C or SIGTERM, the flag parsing
// that tells a usage error from a failure, and the one mapping of run's
// error to what is said on stderr and the exit status.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit statuses of every command.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// ErrUsage marks a command line the command cannot work with: exit status
// ExitUsage.
var ErrUsage = errors.New("usage")

// ErrFailed is a run that reached its verdict, a failure it has already
// reported: exit status ExitFailed with nothing more said.
var ErrFailed = errors.New("failed")

// Run is a command's program: args are its arguments without the command
// name.
type Run func(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error

// Main runs run with a context that ends on Ctrl-C or SIGTERM and exits
// with the status Exit gives its error. name and usage are Exit's.
func Main(name, usage string, run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(Exit(name, usage, err, os.Stderr))
}

// Exit reports err on stderr, after "name: ", and returns the exit status:
// ExitOK for none or -h (flag.ErrHelp, whose text the flags printed),
// ExitUsage for ErrUsage, followed by usage (how to learn the command line;
// "" says nothing more), ExitFailed for ErrFailed, said already, and for
// any other error.
func Exit(name, usage string, err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, ErrFailed):
		return ExitFailed
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if !errors.Is(err, ErrUsage) {
		return ExitFailed
	}
	if usage != "" {
		fmt.Fprintln(stderr, usage)
	}
	return ExitUsage
}

// Parse parses args into fs: -h is flag.ErrHelp, a bad flag an error
// wrapping ErrUsage.
func Parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return fmt.Errorf("%w: %w", ErrUsage, err)
	}
	return err
}

// ParseFlags is Parse for a command whose every setting is a flag: an
// argument is a usage error too.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q (every setting is a flag)", ErrUsage, fs.Arg(0))
	}
	return nil
}

// Usagef is a usage error saying what is wrong with the command line.
func Usagef(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUsage}, args...)...)
}

// IsTerminal reports whether w is a character device such as a terminal,
// where a line can be redrawn in place or coloured.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}
