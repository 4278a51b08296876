package backlog

import "github.com/prometheus/procfs"

// cpuBusyFloor is the share of this machine's CPU time above which the
// report says the CPU, not the consumers, limited the drain: the
// services, Postgres and the broker share the cores, so another instance
// of a consumer only takes time from them.
const cpuBusyFloor = 0.9

// CPUTimes reads this machine's CPU time (busy, total), in seconds, from
// /proc/stat. The drill runs beside make run's processes, so the machine's
// CPU is theirs; where /proc is not there (not Linux) it reports false and
// the report leaves the CPU out.
func CPUTimes() (busy, total float64, ok bool) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, 0, false
	}
	st, err := fs.Stat()
	if err != nil {
		return 0, 0, false
	}
	c := st.CPUTotal
	idle := c.Idle + c.Iowait
	busy = c.User + c.Nice + c.System + c.IRQ + c.SoftIRQ + c.Steal
	return busy, busy + idle, true
}
