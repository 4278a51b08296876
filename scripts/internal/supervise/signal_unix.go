//go:build unix

package supervise

import (
	"os"
	"syscall"
)

// signalGroup signals the child's whole process group.
func signalGroup(p *os.Process, sig syscall.Signal) error {
	return syscall.Kill(-p.Pid, sig)
}
