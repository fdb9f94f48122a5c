package storewrap_test

import (
	"testing"

	"github.com/idemkit/idemkit/internal/storewrap"
	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/store"
)

func TestBuildPanicsOnAMissingMethod(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("Build with Pinger and no Ping did not panic")
		}
	}()
	storewrap.Build(struct{ store.Store }{testkit.NewMem(t)}, storewrap.Pinger, storewrap.Methods{})
}

func TestCoreAndString(t *testing.T) {
	m := testkit.NewMem(t)
	core := struct{ store.Store }{m}
	w := storewrap.Build(core, storewrap.Closer, storewrap.Methods{Close: m.Close})
	if storewrap.Core(w) != store.Store(core) || storewrap.Core(m) != store.Store(m) {
		t.Error("Core does not return the core")
	}
	if got := (storewrap.Closer | storewrap.Scanner).String(); got != "Closer+Scanner" {
		t.Errorf("String: %q", got)
	}
	if got := storewrap.Caps(0).String(); got != "none" {
		t.Errorf("String: %q", got)
	}
}
