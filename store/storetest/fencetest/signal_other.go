//go:build !unix

package fencetest

import "os"

// No signal pauses a process here: RunProcess is skipped.
var stopSignal, contSignal os.Signal
