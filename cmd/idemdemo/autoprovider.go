package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"time"
)

// autoProvider is the value of -provider that makes the demo start its
// own payment provider: this program, run as `idemdemo provider` in a
// process of its own on a free loopback port, stopped with the demo.
const autoProvider = "auto"

// providerLine is how the provider announces its address.
var providerLine = regexp.MustCompile(`payment provider listening on (http://\S+)`)

// startProvider runs `idemdemo provider -addr 127.0.0.1:0` as a child
// process and returns its URL, once it listens, and a function that stops
// it. Its logs go to stderr.
func startProvider(ctx context.Context, stderr io.Writer) (string, func(), error) {
	exe, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("start the payment provider: %w", err)
	}
	cmd := exec.Command(exe, "provider", "-addr", "127.0.0.1:0")
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, fmt.Errorf("start the payment provider: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start the payment provider: %w", err)
	}
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(shutdownTimeout):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := providerLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		_, _ = io.Copy(io.Discard, out) // the rest of its banner
	}()
	select {
	case url := <-found:
		return url, stop, nil
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
	}
	stop()
	return "", nil, fmt.Errorf("start the payment provider: it did not announce its address")
}
