package redistest

import (
	"fmt"
	"os"
	"slices"
)

// testEnv is the part of testing.TB the package uses, so that StartMain
// can run without a test.
type testEnv interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(f func())
	TempDir() string
}

// StartMain starts a server like Start, for use in a TestMain, where no
// testing.TB exists. stop kills the server and removes its directory;
// call it before os.Exit. Where Start would fail the test, StartMain
// returns an error (and has cleaned up). Restart on the returned server
// panics if the server does not come back.
func StartMain(opts ...Option) (s *Server, stop func(), err error) {
	env := &mainEnv{}
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		f, ok := r.(mainFatal)
		if !ok {
			panic(r)
		}
		env.cleanup()
		s, stop, err = nil, nil, f
	}()
	c, err := newConfig(opts)
	if err != nil {
		return nil, nil, err
	}
	s = startFresh(env, freePort, false, c.args)
	return s, env.cleanup, nil
}

// mainEnv implements testEnv outside a test: Fatalf panics with a
// mainFatal, which StartMain recovers.
type mainEnv struct {
	cleanups []func()
}

// mainFatal is a failure reported through mainEnv.Fatalf.
type mainFatal string

func (f mainFatal) Error() string { return string(f) }

func (e *mainEnv) Helper() {}

func (e *mainEnv) Fatalf(format string, args ...any) {
	panic(mainFatal(fmt.Sprintf(format, args...)))
}

func (e *mainEnv) Cleanup(f func()) { e.cleanups = append(e.cleanups, f) }

func (e *mainEnv) TempDir() string {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		e.Fatalf("redistest: %v", err)
	}
	e.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// cleanup runs the registered cleanups, last first, once.
func (e *mainEnv) cleanup() {
	fs := e.cleanups
	e.cleanups = nil
	for _, f := range slices.Backward(fs) {
		f()
	}
}
