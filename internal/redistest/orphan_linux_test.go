package redistest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// orphanChildEnv makes TestServerDiesWithTestProcess run as its own child.
const orphanChildEnv = "REDISTEST_ORPHAN_CHILD"

// TestServerDiesWithTestProcess starts a server in a child test process
// that then exits without running its cleanups, as a test binary does
// when -timeout fires (the testing package panics on its own goroutine)
// or when it is killed. The server must not outlive it, and nothing the
// child left in the temporary directory may outlive the test.
func TestServerDiesWithTestProcess(t *testing.T) {
	if os.Getenv(orphanChildEnv) != "" {
		s := Start(t)
		fmt.Printf("PID %d\nDIR %s\n", s.proc.cmd.Process.Pid, s.Dir())
		os.Exit(3) // no cleanups run, like a test timeout's panic
	}
	// A temporary directory of this test's own, so that other test
	// processes sharing the machine's do not disturb the count of what is
	// left behind.
	base, err := os.MkdirTemp("", "redistest-orphan-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	t.Setenv("TMPDIR", base)

	t.Run("child", runOrphanChild)

	left, err := os.ReadDir(base)
	require.NoError(t, err)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	require.Empty(t, names, "left in the temporary directory")
}

// runOrphanChild runs the child and checks that its server dies with it.
func runOrphanChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestServerDiesWithTestProcess$", "-test.count=1")
	// The child's t.TempDir goes under this test's, which the testing
	// package removes: the child's own cleanups never run.
	cmd.Env = append(os.Environ(), orphanChildEnv+"=1", "TMPDIR="+t.TempDir())
	out, _ := cmd.Output()
	pid, dir := parseChild(t, string(out))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) }) // do not leak it if the test fails
	require.Eventually(t, func() bool { return processGone(pid) }, 10*time.Second, 20*time.Millisecond,
		"redis-server %d outlived the test process that started it", pid)
	require.NotEmpty(t, dir, "child output:\n%s", out)
}

// parseChild reads the PID and DIR lines the child printed.
func parseChild(t *testing.T, out string) (pid int, dir string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PID "); ok {
			pid, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "DIR "); ok {
			dir = v
		}
	}
	require.Positive(t, pid, "child output:\n%s", out)
	return pid, dir
}

// processGone reports whether pid no longer runs (absent, or a zombie
// waiting for a reaper).
func processGone(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
