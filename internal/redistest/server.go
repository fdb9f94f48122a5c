package redistest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/idemkit/idemkit/internal/options"
)

// readyTimeout bounds every wait for a server (or cluster, or replica
// link) to become ready.
const readyTimeout = 20 * time.Second

// installHint tells the reader how to get the Redis binaries.
const installHint = "install Redis with: apt-get install -y redis-server (it also provides redis-cli)"

// Option configures a server started by Start, StartMain,
// StartReplicated, StartSentinel or StartCluster. They refuse an option
// given an invalid argument, naming it, and a nil option by its position
// counted from 1 (a test failure; StartMain's error), reporting every
// error, not only the first.
type Option func(*config) error

type config struct {
	args []string
}

// WithArgs appends extra command-line arguments to redis-server, after
// the ones redistest sets, for example WithArgs("--maxmemory-policy",
// "allkeys-lru"). Later arguments override earlier ones. WithArgs() with
// no argument is refused: it would do nothing.
func WithArgs(args ...string) Option {
	return func(c *config) error {
		if len(args) == 0 {
			return errors.New("WithArgs(): no argument given")
		}
		c.args = append(c.args, args...)
		return nil
	}
}

// newConfig applies opts through options.Apply; its error wraps
// store.ErrInvalid.
func newConfig(opts []Option) (config, error) {
	var c config
	if err := options.Apply(&c, opts); err != nil {
		return config{}, fmt.Errorf("redistest: %w", err)
	}
	return c, nil
}

// Server is one redis-server process listening on a loopback port. Its
// methods are safe for concurrent use, but those that can fail the test
// (Restart) must be called from the test's goroutine.
type Server struct {
	tb   testEnv
	bin  string
	port int
	dir  string
	args []string

	mu   sync.Mutex
	proc *process
}

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has been waited for
}

// Start starts a redis-server on a free loopback port, waits until it
// answers PING, and registers a cleanup that kills it. The server keeps
// no data on disk. It fails the test if redis-server is not in PATH or
// does not become ready within a bounded time; the failure message holds
// the tail of the server's log.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	c, err := newConfig(opts)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	return startFresh(tb, freePort, false, c.args)
}

// startAttempts bounds how many ports startFresh tries.
const startAttempts = 3

// startFresh starts a server on a port from pick (with its cluster bus
// port free too when bus is set), and tries another port when the first
// was taken between the probe and redis-server's bind. It fails the test
// on any other failure, or after startAttempts ports.
func startFresh(tb testEnv, pick func(tb testEnv, bus bool) int, bus bool, args []string) *Server {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		s := newServer(tb, pick(tb, bus), args)
		err := s.start()
		if err == nil {
			return s
		}
		if attempt == startAttempts || !s.portTaken(err) {
			s.fatal(err)
		}
	}
}

// newServer prepares a server on port without starting it, and registers
// the cleanup that stops it.
func newServer(tb testEnv, port int, extra []string) *Server {
	tb.Helper()
	s := &Server{
		tb:   tb,
		bin:  lookPath(tb, "redis-server"),
		port: port,
		dir:  tb.TempDir(),
	}
	s.args = append([]string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--repl-diskless-sync-delay", "0",
		"--dir", s.dir,
		"--logfile", s.logPath(),
	}, extra...)
	tb.Cleanup(s.Stop)
	return s
}

// lookPath finds a binary in PATH or fails the test, naming the install
// command.
func lookPath(tb testEnv, name string) string {
	tb.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		tb.Fatalf("redistest: %s not found in PATH (%v); %s", name, err, installHint)
	}
	return p
}

// Addr returns the server's address, "127.0.0.1:port".
func (s *Server) Addr() string {
	return "127.0.0.1:" + strconv.Itoa(s.port)
}

// Port returns the server's TCP port.
func (s *Server) Port() int { return s.port }

// Dir returns the server's working directory, which holds its log.
func (s *Server) Dir() string { return s.dir }

func (s *Server) logPath() string    { return filepath.Join(s.dir, "redis.log") }
func (s *Server) stdoutPath() string { return filepath.Join(s.dir, "stdout.log") }

// Options returns client options for the server: its address, and
// maintenance notifications disabled (redis-server 7.0 does not know
// them). Callers may change the returned value.
func (s *Server) Options() *redis.Options {
	return &redis.Options{
		Addr:                     s.Addr(),
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	}
}

// Client returns a new client for the server with Options(), closed when
// the test ends.
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	c := redis.NewClient(s.Options())
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop kills the server (SIGKILL on Unix) and waits for it to exit. New
// connections to its address are then refused. Stopping a stopped server
// does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	_ = s.proc.cmd.Process.Kill()
	<-s.proc.done
	s.proc = nil
}

// Restart stops the server if it runs and starts it again on the same
// port with the same arguments, waiting until it answers PING. The data
// is gone: the server keeps none on disk. It fails the test when the
// server does not come back.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Stop()
	s.startOrFail()
}

// startOrFail starts the process and waits for PING, failing the test
// with the log tail when either step fails.
func (s *Server) startOrFail() {
	s.tb.Helper()
	if err := s.start(); err != nil {
		s.fatal(err)
	}
}

// fatal fails the test with err and the server's log tail.
func (s *Server) fatal(err error) {
	s.tb.Helper()
	s.tb.Fatalf("redistest: redis-server on %s: %v\n%s", s.Addr(), err, s.logTail())
}

// portTaken reports whether the start that failed with err failed because
// another process held the port (or the cluster bus port).
func (s *Server) portTaken(err error) bool {
	if errors.Is(err, errForeignServer) {
		return true
	}
	log, _ := os.ReadFile(s.logPath())
	return strings.Contains(string(log), "Address already in use")
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		return errors.New("already running")
	}
	p, err := s.spawn()
	if err != nil {
		return err
	}
	s.proc = p
	err = waitReady(s.Addr(), p.done)
	if err == nil {
		err = checkOwner(s.Addr(), p.cmd.Process.Pid)
	}
	if err != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
		s.proc = nil
		return err
	}
	return nil
}

// spawn starts redis-server with its output going to stdout.log.
func (s *Server) spawn() (*process, error) {
	out, err := os.OpenFile(s.stdoutPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("starting %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(p.done)
	}()
	return p, nil
}

// errForeignServer reports a redis-server answering on our port that is
// not the process the harness started.
var errForeignServer = errors.New("port taken by another redis-server")

// checkOwner makes sure the server answering on addr is the process this
// harness started, not another redis-server that took the port between the
// free-port probe and the spawn (our own process would then fail to bind).
func checkOwner(addr string, pid int) error {
	info, err := do(addr, "INFO", "server")
	if err != nil {
		return fmt.Errorf("INFO server: %w", err)
	}
	if got := infoField(info, "process_id"); got != strconv.Itoa(pid) {
		return fmt.Errorf("%w (process_id %s, ours %d)", errForeignServer, got, pid)
	}
	return nil
}

// waitReady polls addr with PING until it answers PONG, the process
// exits, or readyTimeout passes.
func waitReady(addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(readyTimeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited during startup")
		default:
		}
		reply, err := do(addr, "PING")
		if err == nil && reply == "PONG" {
			return nil
		}
		last = err
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("not answering PING after %v (last error: %v)", readyTimeout, last)
}

// logTail returns the last lines of the server's log and output.
func (s *Server) logTail() string {
	return "--- redis.log (tail) ---\n" + tail(s.logPath(), 30) +
		"--- stdout/stderr (tail) ---\n" + tail(s.stdoutPath(), 10)
}
