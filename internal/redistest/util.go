package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// freePort returns a loopback TCP port nobody listens on. With bus set,
// port+10000 (the Redis Cluster bus port) is free as well.
func freePort(tb testEnv, bus bool) int {
	tb.Helper()
	for range 100 {
		port, err := listenAndClose(0)
		if err != nil {
			tb.Fatalf("redistest: finding a free port: %v", err)
		}
		if !bus {
			return port
		}
		if port+10000 > 65535 {
			continue
		}
		if _, err := listenAndClose(port + 10000); err == nil {
			return port
		}
	}
	tb.Fatalf("redistest: no free port pair (port, port+10000) found")
	return 0
}

// listenAndClose binds 127.0.0.1:port (0 picks one), closes it, and
// returns the port bound.
func listenAndClose(port int) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return 0, err
	}
	p := l.Addr().(*net.TCPAddr).Port
	return p, l.Close()
}

// do sends one command to addr on a fresh connection and returns its
// reply as a string: simple strings, integers and bulk strings are
// returned as is, error replies as an error. It is for health checks,
// where a full client would add retries and logging.
func do(addr string, args ...string) (string, error) {
	replies, err := doSeq(addr, args)
	if err != nil {
		return "", err
	}
	return replies[0], nil
}

// doSeq sends commands, in order, on one fresh connection to addr and
// returns their replies as do does, stopping at the first error.
func doSeq(addr string, cmds ...[]string) ([]string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		return nil, err
	}
	r := bufio.NewReader(conn)
	replies := make([]string, 0, len(cmds))
	for _, args := range cmds {
		if _, err := io.WriteString(conn, encode(args)); err != nil {
			return nil, err
		}
		reply, err := readReply(r)
		if err != nil {
			return nil, err
		}
		replies = append(replies, reply)
	}
	return replies, nil
}

// encode renders args as a RESP array of bulk strings.
func encode(args []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// readReply reads one RESP2 reply that is not an array.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		return readBulk(r, line[1:])
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// readBulk reads the body of a bulk string whose length header is n.
func readBulk(r *bufio.Reader, n string) (string, error) {
	size, err := strconv.Atoi(n)
	if err != nil {
		return "", fmt.Errorf("bad bulk length %q", n)
	}
	if size < 0 {
		return "", errors.New("nil reply")
	}
	buf := make([]byte, size+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf[:size]), nil
}

// infoField returns the value of "name:value" in an INFO or CLUSTER INFO
// reply, or "".
func infoField(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// waitFor polls cond until it returns nil or readyTimeout passes, and
// returns cond's last error in that case.
func waitFor(what string, cond func() error) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not ready after %v: %w", what, readyTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tail returns the last n lines of the file at path, or a note saying
// why it could not be read.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(%v)\n", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}
