//go:build !linux

package dynalitetest

import "syscall"

// sysProcAttr returns nil: outside Linux there is no parent-death signal.
func sysProcAttr() *syscall.SysProcAttr {
	return nil
}
