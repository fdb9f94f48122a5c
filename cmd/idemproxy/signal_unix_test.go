//go:build unix

package main

import (
	"context"
	"os"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/idemkit/idemkit/internal/testkit"
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
	testkit.WaitFor(t, "the reload", func() bool { return reloads.Load() != 0 })
	if reloads.Load() != 1 {
		t.Fatalf("reloads %d after one SIGHUP", reloads.Load())
	}
}
