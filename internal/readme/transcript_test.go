package readme

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/redistest"
)

// A transcript is a ```console block whose lines starting with "$ " are
// commands and whose other lines are what the command before them prints.
// The runner executes each block in a fresh bash, in a scratch directory
// holding a link named cmd to the repository's cmd folder, with the
// programs idemdemo, idemctl, idemproxy and idemtour, built from this
// checkout, first on PATH.
//
// Documented placeholders, which differ from run to run and are compared
// by shape only (see placeholders): timestamps, urn:uuid ids, one-time
// tokens, durations, Retry-After seconds, Content-Length, the Python
// backend's "at" time and version, bash's report of a killed job. Date: header lines are not compared. Ports: every
// host:port of a loopback host named in a command is replaced by a free
// port for the run, and the free port by the documented one in what the
// command prints.
//
// A comment line "<!-- transcript: redis=PORT -->" before a block starts
// a redis-server (internal/redistest) and gives it the documented PORT. A
// block of any language preceded by "<!-- file: NAME -->" is written to
// NAME in the scratch directory of every transcript of the same document.
var (
	consoleBlock = regexp.MustCompile("(?ms)^(<!-- transcript: ([^>]*) -->\n)?```console\n(.*?)^```")
	fileBlock    = regexp.MustCompile("(?ms)^<!-- file: (\\S+) -->\n```[a-z]*\n(.*?)^```")
	loopbackPort = regexp.MustCompile(`\b(localhost|127\.0\.0\.1):(\d{4,5})\b`)
)

// update rewrites each console block with what its commands printed, for
// a writer who changed a program's output: go test ./internal/readme/
// -run TestTranscripts -update. Review the diff before committing it.
var update = flag.Bool("update", false, "rewrite console blocks with what their commands print")

var updateMu sync.Mutex

// placeholders rewrite what differs between runs to a fixed word, in both
// the documented and the actual output.
var placeholders = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "<time>"},
	{regexp.MustCompile(`urn:uuid:[0-9a-f-]{36}`), "urn:uuid:<id>"},
	{regexp.MustCompile(`"token":"[A-Za-z0-9_-]{20,}"`), `"token":"<token>"`},
	{regexp.MustCompile(`\b(\d+h)?(\d+m)?\d+(\.\d+)?(ns|µs|ms|s)\b`), "<duration>"},
	{regexp.MustCompile(`(?m)^Retry-After: \d+$`), "Retry-After: <seconds>"},
	{regexp.MustCompile(`(?m)^Content-Length: \d+$`), "Content-Length: <n>"}, // bodies hold times and ids
	{regexp.MustCompile(`"at":[0-9.e+]+`), `"at":<time>`},
	{regexp.MustCompile(`(?m)^(fencing token +)\d+$`), "${1}<fence>"}, // from the clock on a key's first claim
	{regexp.MustCompile(`"fence":\d+`), `"fence":<fence>`},
	{regexp.MustCompile(`Python/[0-9.]+`), "Python/<version>"},
	{regexp.MustCompile(`(?m)^bash: line \d+: +\d+ Killed +`), "bash: line <n>: <pid> Killed "},
}

// transcript is one console block of a document.
type transcript struct {
	file     string
	n        int
	raw      string            // the block's text between the fences
	redis    string            // documented port of a redis-server to start, or ""
	files    map[string]string // files of the document, by name
	commands []command
}

type command struct {
	line, want string
}

// transcripts returns the console blocks of README.md and docs/*.md.
func transcripts(t *testing.T) []transcript {
	t.Helper()
	var out []transcript
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]string{}
		for _, m := range fileBlock.FindAllSubmatch(text, -1) {
			files[string(m[1])] = string(m[2])
		}
		for i, m := range consoleBlock.FindAllSubmatch(text, -1) {
			tr := transcript{file: f, n: i + 1, files: files, raw: string(m[3])}
			for _, kv := range strings.Fields(string(m[2])) {
				k, v, _ := strings.Cut(kv, "=")
				if k != "redis" {
					t.Fatalf("%s: console block %d: unknown directive %q", f, i+1, kv)
				}
				tr.redis = v
			}
			tr.commands = parseCommands(string(m[3]))
			if len(tr.commands) == 0 {
				t.Fatalf("%s: console block %d has no \"$ \" command", f, i+1)
			}
			out = append(out, tr)
		}
	}
	return out
}

// parseCommands splits a block into commands and their documented output.
func parseCommands(block string) []command {
	var cmds []command
	for _, line := range strings.Split(block, "\n") {
		if cmd, ok := strings.CutPrefix(line, "$ "); ok {
			cmds = append(cmds, command{line: cmd})
			continue
		}
		if len(cmds) > 0 {
			cmds[len(cmds)-1].want += line + "\n"
		}
	}
	return cmds
}

// normalize applies the placeholders, drops Date: lines and carriage
// returns, and trims blank lines at both ends.
func normalize(s string) string {
	s = strings.ReplaceAll(s, "\r", "")
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, "Date: ") {
			keep = append(keep, strings.TrimRight(l, " \t"))
		}
	}
	s = strings.Trim(strings.Join(keep, "\n"), "\n")
	for _, p := range placeholders {
		s = p.re.ReplaceAllString(s, p.with)
	}
	return s
}

// TestTranscripts runs every console block of README.md and docs/*.md and
// compares what each command prints with the document.
func TestTranscripts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the programs")
	}
	for _, tool := range []string{"bash", "curl", "python3", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the transcripts need %s: %v", tool, err)
		}
	}
	trs := transcripts(t)
	if len(trs) < 3 {
		t.Fatalf("found %d console blocks; the extraction is broken", len(trs))
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.Command("go", "build", "-o", bin+string(os.PathSeparator),
		"./cmd/idemdemo", "./cmd/idemctl", "./cmd/idemproxy", "./cmd/idemtour")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the programs: %v\n%s", err, out)
	}
	for _, tr := range trs {
		name := fmt.Sprintf("%s#%d", strings.TrimPrefix(tr.file, "../../"), tr.n)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runTranscript(t, tr, root, bin)
		})
	}
}

// runTranscript runs one block's commands in one bash and compares.
func runTranscript(t *testing.T, tr transcript, root, bin string) {
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "cmd"), filepath.Join(dir, "cmd")); err != nil {
		t.Fatal(err)
	}
	ports := map[string]string{} // documented → actual
	if tr.redis != "" {
		ports[tr.redis] = strconv.Itoa(redistest.Start(t).Port())
	}
	for name, text := range tr.files {
		write(t, filepath.Join(dir, name), mapPorts(t, ports, text))
	}
	sh := startShell(t, dir, bin)
	var rewritten strings.Builder
	defer func() {
		if *update && !t.Failed() {
			rewrite(t, tr, rewritten.String())
		}
	}()
	for i, c := range tr.commands {
		line := mapPorts(t, ports, c.line)
		got := sh.run(t, line)
		for doc, actual := range ports {
			got = strings.ReplaceAll(got, actual, doc)
		}
		if strings.HasSuffix(strings.TrimSpace(line), "&") {
			// A server started in the background: wait until it listens.
			for _, m := range loopbackPort.FindAllStringSubmatch(line, -1) {
				waitListening(t, net.JoinHostPort("127.0.0.1", m[2]))
			}
		}
		fmt.Fprintf(&rewritten, "$ %s\n%s", c.line, strings.TrimLeft(strings.ReplaceAll(got, "\r", ""), "\n"))
		if *update {
			continue
		}
		if want := normalize(c.want); normalize(got) != want {
			t.Errorf("%s, command %d:\n$ %s\nprinted (normalised):\n%s\n\nthe document shows (normalised):\n%s",
				tr.file, i+1, c.line, normalize(got), want)
			return
		}
	}
}

// mapPorts replaces every loopback host:port of text by a free port, the
// same one for each documented port, recording the pairs in ports.
func mapPorts(t *testing.T, ports map[string]string, text string) string {
	return loopbackPort.ReplaceAllStringFunc(text, func(hp string) string {
		host, port, _ := strings.Cut(hp, ":")
		if _, ok := ports[port]; !ok {
			ports[port] = strconv.Itoa(freePort(t))
		}
		return host + ":" + ports[port]
	})
}

// rewrite replaces tr's block in its file by text.
func rewrite(t *testing.T, tr transcript, text string) {
	updateMu.Lock()
	defer updateMu.Unlock()
	doc, err := os.ReadFile(tr.file)
	if err != nil {
		t.Fatal(err)
	}
	old := "```console\n" + tr.raw + "```"
	if !strings.Contains(string(doc), old) {
		t.Fatalf("%s: block %d changed while running", tr.file, tr.n)
	}
	var keep []string
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "Date: ") {
			keep = append(keep, l)
		}
	}
	text = strings.TrimRight(strings.Join(keep, "\n"), "\n") + "\n"
	write(t, tr.file, strings.Replace(string(doc), old, "```console\n"+text+"```", 1))
}

// shell is a bash reading commands on its standard input.
type shell struct {
	in    io.WriteCloser
	lines chan string
	n     int
}

// readerEnv is the test's environment without IDEMKIT_* variables: a
// session runs as a reader would type it, whatever the test's own
// environment sets (the programs refuse an IDEMKIT_* variable they do not
// know, such as the bench module's IDEMKIT_BENCH_REDIS).
func readerEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IDEMKIT_") {
			env = append(env, kv)
		}
	}
	return env
}

// startShell starts bash in its own process group, killed with everything
// it started when the test ends.
func startShell(t *testing.T, dir, bin string) *shell {
	t.Helper()
	cmd := exec.Command("bash", "--norc", "--noprofile")
	cmd.Dir = dir
	cmd.Env = append(readerEnv(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	sh := &shell{in: in, lines: make(chan string, 1024)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			sh.lines <- sc.Text()
		}
		close(sh.lines)
	}()
	if _, err := io.WriteString(in, "exec 2>&1\n"); err != nil {
		t.Fatal(err)
	}
	return sh
}

// run sends line to the shell and returns what it printed, waiting at
// most 30 s.
func (sh *shell) run(t *testing.T, line string) string {
	t.Helper()
	sh.n++
	marker := fmt.Sprintf("__transcript_end_%d__", sh.n)
	if _, err := fmt.Fprintf(sh.in, "%s\nprintf '\\n%s\\n'\n", line, marker); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var b strings.Builder
	for {
		select {
		case l, ok := <-sh.lines:
			if !ok {
				t.Fatalf("$ %s: the shell exited; it printed:\n%s", line, b.String())
			}
			if l == marker {
				return b.String()
			}
			b.WriteString(l + "\n")
		case <-ctx.Done():
			t.Fatalf("$ %s: no end after 30 s; it printed:\n%s", line, b.String())
		}
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitListening waits up to 20 s for addr to accept connections.
func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: nothing listening after 20 s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
