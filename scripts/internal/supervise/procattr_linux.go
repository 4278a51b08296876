//go:build linux

package supervise

import "syscall"

// sysProcAttr puts the child in its own process group and asks the kernel to
// send it SIGTERM if the runner dies without stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}
