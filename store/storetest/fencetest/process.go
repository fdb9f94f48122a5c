package fencetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store"
)

// Environment of a child process of RunProcess.
const (
	envChild = "IDEMKIT_FENCETEST_CHILD" // the argument of the child's open
	envKey   = "IDEMKIT_FENCETEST_KEY"   // the key it claims
	envBeat  = "IDEMKIT_FENCETEST_BEAT"  // "1": the claim keeps a heartbeat
)

// processLease is the lease of the child's claim.
const processLease = 300 * time.Millisecond

// Lines a child prints, and its exit codes.
const (
	lineToken    = "TOKEN "    // followed by its claim's token
	lineComplete = "COMPLETE " // followed by what Complete returned
	leaseLost    = "lease-lost"
	exitRefused  = 0 // Complete returned ErrLeaseLost
	exitAccepted = 1 // Complete returned something else
	exitBroken   = 2 // the child could not run
)

// Child makes this process a child of RunProcess when the parent started
// it as one, and then exits; otherwise it returns at once. Call it first
// thing in TestMain, before anything a child must not do (start servers,
// create databases). open opens the store named by the argument the
// parent gave RunProcess; store.Open fits when that is a store URL.
func Child(open func(ctx context.Context, arg string) (store.Store, error)) {
	arg, ok := os.LookupEnv(envChild)
	if !ok {
		return
	}
	os.Exit(child(open, arg))
}

// child claims the key, prints its token, waits for a line on stdin
// (the parent stops it meanwhile, and writes the line once it has taken
// the key over), then completes and prints what Complete returned.
func child(open func(ctx context.Context, arg string) (store.Store, error), arg string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	broken := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "fencetest child: %s: %v\n", what, err)
		return exitBroken
	}
	s, err := open(ctx, arg)
	if err != nil {
		return broken("open", err)
	}
	if c, ok := s.(store.Closer); ok {
		defer c.Close()
	}
	e, err := idemkit.New(s, engineOptions(processLease, idemkit.ObserverFunc(func(context.Context, idemkit.Event) {}))...)
	if err != nil {
		return broken("engine", err)
	}
	var opts []idemkit.Option
	if os.Getenv(envBeat) != "1" {
		opts = append(opts, idemkit.WithoutHeartbeat())
	}
	c, _, err := e.Begin(ctx, os.Getenv(envKey), "", opts...)
	if err != nil || c == nil {
		return broken("Begin", err)
	}
	fmt.Printf("%s%d\n", lineToken, c.Fence())
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		c.Release(ctx)
		return broken("waiting for the parent", err)
	}
	err = c.Complete(ctx, []byte("child"))
	if errors.Is(err, idemkit.ErrLeaseLost) {
		fmt.Println(lineComplete + leaseLost)
		return exitRefused
	}
	fmt.Printf("%s%v\n", lineComplete, err)
	return exitAccepted
}

// RunProcess checks fencing across processes, once for a child claim
// without a heartbeat and once with one, in parallel subtests (RunProcess
// returns before they end; s must stay open until t ends). The test binary runs itself as a
// child (see Child), which opens the store named by arg, claims a fresh
// key and prints its token. With a heartbeat, the parent first waits until
// the child has held the key for longer than a lease. It stops the child
// with SIGSTOP, claims the key through s until its lease has ended (the
// takeover's token must be larger than the child's), completes it, and
// resumes the child with SIGCONT: the child's Complete must return
// ErrLeaseLost, and the key must keep the parent's result and token. s
// and the store opened from arg must share one backend and key space.
// RunProcess is skipped where SIGSTOP does not exist.
func RunProcess(t *testing.T, s store.Store, arg string) {
	t.Helper()
	if stopSignal == nil {
		t.Skip("fencetest: no SIGSTOP on this system")
	}
	for _, beat := range []bool{false, true} {
		name := "WithoutHeartbeat"
		if beat {
			name = "Heartbeat"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runProcess(t, s, arg, beat)
		})
	}
}

// childProc is a running child and the lines it prints.
type childProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startChild starts the child of a RunProcess case; it is killed (after
// a SIGCONT) when t ends, if still running.
func startChild(t *testing.T, arg, key string, beat bool) *childProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	b := "0"
	if beat {
		b = "1"
	}
	cmd.Env = append(os.Environ(), envChild+"="+arg, envKey+"="+key, envBeat+"="+b)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := &childProc{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			ch.lines <- sc.Text()
		}
		close(ch.lines)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(contSignal)
			_ = cmd.Process.Kill()
			for range ch.lines {
			}
			_ = cmd.Wait()
		}
	})
	return ch
}

// line returns the child's next line that starts with prefix, without
// the prefix; other lines are logged.
func (ch *childProc) line(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case l, ok := <-ch.lines:
			if !ok {
				t.Fatalf("fencetest: the child exited before printing %q", prefix)
			}
			if rest, found := strings.CutPrefix(l, prefix); found {
				return rest
			}
			t.Log("child:", l)
		case <-timeout:
			t.Fatalf("fencetest: the child printed no %q within a minute", prefix)
		}
	}
}

func runProcess(t *testing.T, s store.Store, arg string, beat bool) {
	ctx := t.Context()
	key := "fence-process-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	e, err := idemkit.New(s, engineOptions(processLease, idemkit.ObserverFunc(func(context.Context, idemkit.Event) {}))...)
	if err != nil {
		t.Fatal(err)
	}
	var down downstream
	ch := startChild(t, arg, key, beat)
	childFence, err := strconv.ParseUint(ch.line(t, lineToken), 10, 64)
	if err != nil {
		t.Fatalf("fencetest: the child's token: %v", err)
	}
	down.write(childFence)
	info, err := e.Inspect(ctx, idemkit.ModeDo, key)
	if err != nil || info.Fence != childFence || info.State != idemkit.StateInProgress {
		t.Fatalf("fencetest: the child's claim: Inspect = %s with token %d, %v; want %s with token %d",
			info.State, info.Fence, err, idemkit.StateInProgress, childFence)
	}

	if beat {
		// The child's heartbeat keeps the key past its first lease.
		deadline := time.Now().Add(30 * time.Second)
		for info.Updated.Sub(info.Created) < processLease {
			if time.Now().After(deadline) {
				t.Fatalf("fencetest: the child's heartbeat did not renew its lease within 30s (last beat %v after the claim)", info.Updated.Sub(info.Created))
			}
			time.Sleep(20 * time.Millisecond)
			if info, err = e.Inspect(ctx, idemkit.ModeDo, key); err != nil {
				t.Fatal(err)
			}
		}
		if info.Fence != childFence {
			t.Fatalf("fencetest: the key holds token %d, not the live child's %d", info.Fence, childFence)
		}
		if _, _, err := e.Begin(ctx, key, "", idemkit.WithoutHeartbeat()); !errors.Is(err, idemkit.ErrInProgress) {
			t.Fatalf("fencetest: Begin while the child's heartbeat holds the key: %v, want ErrInProgress", err)
		}
	}

	if err := ch.cmd.Process.Signal(stopSignal); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	var c *idemkit.Claim
	deadline := time.Now().Add(30 * time.Second)
	for c == nil {
		var res idemkit.Result
		c, res, err = e.Begin(ctx, key, "", idemkit.WithoutHeartbeat())
		switch {
		case errors.Is(err, idemkit.ErrInProgress) && time.Now().Before(deadline):
			time.Sleep(10 * time.Millisecond) // the child's lease has not ended yet
		case err != nil || c == nil:
			t.Fatalf("fencetest: taking the stopped child's key over: %v (replayed %v)", err, res.Replayed)
		}
	}
	takenAfter := time.Since(stopped)
	if c.Fence() <= childFence {
		t.Errorf("fencetest: the takeover got token %d, not larger than the child's %d", c.Fence(), childFence)
	}
	if !down.write(c.Fence()) {
		t.Errorf("fencetest: the fenced downstream refused the takeover's token %d", c.Fence())
	}
	if err := c.Complete(ctx, []byte("parent")); err != nil {
		t.Fatalf("fencetest: completing the takeover: %v", err)
	}

	if _, err := io.WriteString(ch.stdin, "go\n"); err != nil {
		t.Fatal(err)
	}
	_ = ch.stdin.Close()
	if err := ch.cmd.Process.Signal(contSignal); err != nil {
		t.Fatal(err)
	}
	got := ch.line(t, lineComplete)
	for l := range ch.lines { // read to the end before Wait closes the pipe
		t.Log("child:", l)
	}
	err = ch.cmd.Wait()
	if got != leaseLost {
		t.Errorf("fencetest: the resumed child's Complete returned %q, want ErrLeaseLost (exit: %v)", got, err)
	} else if err != nil {
		t.Errorf("fencetest: the child: %v", err)
	}
	if down.write(childFence) {
		t.Errorf("fencetest: the fenced downstream accepted the resumed child's token %d", childFence)
	}
	info, err = e.Inspect(ctx, idemkit.ModeDo, key)
	if err != nil || info.State != idemkit.StateCompleted || info.Fence != c.Fence() {
		t.Errorf("fencetest: after the child's Complete, Inspect = %s with token %d, %v; want %s with token %d",
			info.State, info.Fence, err, idemkit.StateCompleted, c.Fence())
	}
	if _, res, err := e.Begin(ctx, key, ""); err != nil || string(res.Value) != "parent" {
		t.Errorf("fencetest: a repeat got %q, %v; want the parent's result", res.Value, err)
	}
	t.Logf("child token %d, taken over %v after SIGSTOP with token %d; the resumed child's Complete: %s",
		childFence, takenAfter.Round(time.Millisecond), c.Fence(), got)
}
