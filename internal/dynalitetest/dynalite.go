package dynalitetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// Env names the environment variable holding the path of dynalite's
// cli.js.
const Env = "DYNALITE_CLI"

// readyTimeout bounds the wait for a started server to answer.
const readyTimeout = 20 * time.Second

// Lookup returns the path of dynalite's cli.js from DYNALITE_CLI.
// When the variable is unset it returns an empty path and the reason the
// tests skip, or, under CI=true, an error: CI must run these tests.
func Lookup() (path, skip string, err error) {
	path = os.Getenv(Env)
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", "", fmt.Errorf("dynalitetest: %s=%s: %w", Env, path, err)
		}
		return path, "", nil
	}
	const why = Env + " is unset: run ./scripts/test.sh, which installs dynalite (npm) and sets it"
	if os.Getenv("CI") == "true" {
		return "", "", errors.New("dynalitetest: " + why + " (required under CI=true)")
	}
	return "", why, nil
}

// Server is one dynalite process listening on a loopback port, keeping
// its tables in memory.
type Server struct {
	cmd      *exec.Cmd
	endpoint string
	out      *syncBuffer
	done     chan struct{}
	stopOnce sync.Once
}

// Start starts dynalite from cli (the path Lookup returned) on a free
// loopback port, with tables that become active at once, and waits until
// it answers. Stop stops it.
func Start(ctx context.Context, cli string) (*Server, error) {
	var last error
	for range 3 { // another process may take the free port first
		s, err := start(ctx, cli)
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func start(ctx context.Context, cli string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("dynalitetest: %w (install Node.js: apt-get install -y nodejs)", err)
	}
	out := &syncBuffer{}
	cmd := exec.Command(node, cli, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("dynalitetest: start %s: %w", cli, err)
	}
	s := &Server{cmd: cmd, endpoint: "http://127.0.0.1:" + strconv.Itoa(port), out: out, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(ctx, port); err != nil {
		s.Stop()
		return nil, fmt.Errorf("dynalitetest: %w\n%s", err, out.String())
	}
	return s, nil
}

// waitReady polls the port until it accepts a connection, the process
// exits, or readyTimeout passes.
func (s *Server) waitReady(ctx context.Context, port int) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var d net.Dialer
		if c, err := d.DialContext(ctx, "tcp", addr); err == nil {
			c.Close()
			return nil
		}
		select {
		case <-s.done:
			return errors.New("dynalite exited before it answered")
		case <-ctx.Done():
			return fmt.Errorf("dynalite did not answer on %s: %w", addr, ctx.Err())
		case <-tick.C:
		}
	}
}

// Endpoint returns the server's base URL, http://127.0.0.1:PORT.
func (s *Server) Endpoint() string { return s.endpoint }

// Output returns what the server printed so far.
func (s *Server) Output() string { return s.out.String() }

// Stop kills the server and waits for it to exit. It may be called more
// than once.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("dynalitetest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
