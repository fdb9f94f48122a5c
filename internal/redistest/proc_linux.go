package redistest

import "syscall"

// sysProcAttr has the kernel kill redis-server when the test process
// dies, so that a test binary that exits without running its cleanups
// (a -timeout panic, os.Exit, SIGKILL) leaves no server behind.
//
// Linux sends the signal when the thread that started the child exits;
// the Go runtime keeps its threads for the life of the process unless a
// goroutine exits while locked to one, which the harness never does.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
