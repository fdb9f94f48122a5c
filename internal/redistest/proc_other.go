//go:build !linux

package redistest

import "syscall"

// sysProcAttr returns nil: outside Linux there is no parent-death signal,
// and a test binary that exits without running its cleanups leaves its
// servers running.
func sysProcAttr() *syscall.SysProcAttr {
	return nil
}
