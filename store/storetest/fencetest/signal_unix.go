//go:build unix

package fencetest

import (
	"os"
	"syscall"
)

// The signals that pause and resume a child.
var stopSignal, contSignal os.Signal = syscall.SIGSTOP, syscall.SIGCONT
