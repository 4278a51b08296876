//go:build !unix

package supervise

import (
	"os"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// signalGroup kills the child: this platform has neither process groups nor
// SIGTERM, so there is no graceful stop.
func signalGroup(p *os.Process, _ syscall.Signal) error { return p.Kill() }
