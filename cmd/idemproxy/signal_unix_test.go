//go:build unix

package main

import (
	"context"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestSIGHUPReloadsKeys sends the process a real SIGHUP.
func TestSIGHUPReloadsKeys(t *testing.T) {
	var reloads atomic.Int64
	p := &proxy{log: testLog(t), reloadKeys: func() error { reloads.Add(1); return nil }}
	stop := p.reloadOnHUP(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for reloads.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if reloads.Load() != 1 {
		t.Fatalf("reloads %d after one SIGHUP", reloads.Load())
	}
}
