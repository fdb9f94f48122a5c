package dynalitetest

import "syscall"

// sysProcAttr has the kernel kill dynalite when the test process dies, so
// that a test binary that exits without stopping it (a -timeout panic,
// SIGKILL) leaves no server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
