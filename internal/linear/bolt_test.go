package linear_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/rpc"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/linear"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
)

// boltChildEnv names the variable that makes the test binary the child
// that holds the bbolt file at its value and serves the store over
// net/rpc on a loopback port, which it prints. It exits when its stdin
// closes (the parent ended) or after boltChildMax.
const boltChildEnv = "IDEMKIT_LINEAR_BOLT_CHILD"

const boltChildMax = 2 * time.Hour

func TestMain(m *testing.M) {
	if path := os.Getenv(boltChildEnv); path != "" {
		os.Exit(boltChild(path))
	}
	if spec := os.Getenv(clientChildEnv); spec != "" {
		os.Exit(clientChild(spec))
	}
	os.Exit(m.Run())
}

// Req and Resp are the child's RPC messages: one store operation.
type Req struct {
	Kind       string
	Key        string
	Value, Old []byte
	Items      []store.BatchItem
}

type Resp struct {
	OK       bool
	Entry    store.Entry
	Value    []byte
	Results  []store.BatchResult
	NotFound bool
	Err      string
}

// Bolt is the child's RPC service.
type Bolt struct{ s *boltstore.Store }

// Do runs one operation on the child's store.
func (b *Bolt) Do(req Req, resp *Resp) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	req.Value, req.Old = nonNil(req.Value), nonNil(req.Old)
	for i := range req.Items {
		req.Items[i].Value = nonNil(req.Items[i].Value)
	}
	switch req.Kind {
	case "setnx":
		resp.OK, resp.Entry, err = b.s.SetNX(ctx, req.Key, req.Value, time.Hour)
	case "get":
		resp.Entry, err = b.s.Get(ctx, req.Key)
	case "cas":
		resp.OK, err = b.s.CompareAndSwap(ctx, req.Key, req.Old, req.Value, time.Hour)
	case "cad":
		resp.OK, err = b.s.CompareAndDelete(ctx, req.Key, req.Old)
	case "consume":
		resp.Value, err = b.s.Consume(ctx, req.Key)
	case "batch":
		resp.Results, err = b.s.SetNXBatch(ctx, req.Items)
	default:
		err = fmt.Errorf("unknown operation %q", req.Kind)
	}
	if errors.Is(err, store.ErrNotFound) {
		resp.NotFound = true
	} else if err != nil {
		resp.Err = err.Error()
	}
	return nil
}

func boltChild(path string) int {
	s, err := boltstore.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	srv := rpc.NewServer()
	if err := srv.Register(&Bolt{s: s}); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	fmt.Println(ln.Addr().String())
	go srv.Accept(ln)
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(boltChildMax):
	}
	_ = s.Close()
	return 0
}

// boltProc is the parent's side: a store.Store whose operations run in
// the current child, which the test kills and restarts.
type boltProc struct {
	path string

	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.Closer
	client *rpc.Client
}

var (
	_ store.Store   = (*boltProc)(nil)
	_ store.Batcher = (*boltProc)(nil)
)

func startBoltProc(t *testing.T) *boltProc {
	b := &boltProc{path: filepath.Join(t.TempDir(), "idem.db")}
	b.start(t)
	t.Cleanup(b.kill)
	return b
}

// start starts a child on the file and connects to it.
func (b *boltProc) start(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), boltChildEnv+"="+b.path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("bbolt child: %v", err)
	}
	client, err := rpc.Dial("tcp", strings.TrimSpace(addr))
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("bbolt child: %v", err)
	}
	b.mu.Lock()
	b.cmd, b.stdin, b.client = cmd, stdin, client
	b.mu.Unlock()
}

// kill kills the child with SIGKILL and waits for it.
func (b *boltProc) kill() {
	b.mu.Lock()
	cmd, stdin, client := b.cmd, b.stdin, b.client
	b.cmd, b.stdin, b.client = nil, nil, nil
	b.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	_ = stdin.Close()
	_ = client.Close()
}

var errNoChild = errors.New("no bbolt child running")

func (b *boltProc) do(ctx context.Context, req Req) (*Resp, error) {
	b.mu.Lock()
	client := b.client
	b.mu.Unlock()
	if client == nil {
		return nil, store.Unavailable(req.Kind, fmt.Errorf("%w: %w", linear.ErrNotSent, errNoChild))
	}
	resp := &Resp{}
	call := client.Go("Bolt.Do", req, resp, make(chan *rpc.Call, 1))
	select {
	case <-call.Done:
	case <-ctx.Done():
		return nil, store.Unavailable(req.Kind, ctx.Err())
	}
	switch {
	case call.Error != nil:
		return nil, store.Unavailable(req.Kind, call.Error)
	case resp.NotFound:
		return nil, store.ErrNotFound
	case resp.Err != "":
		return nil, fmt.Errorf("%s: child: %s", req.Kind, resp.Err)
	}
	return resp, nil
}

func (b *boltProc) SetNX(ctx context.Context, key string, v []byte, _ time.Duration) (bool, store.Entry, error) {
	r, err := b.do(ctx, Req{Kind: "setnx", Key: key, Value: v})
	if err != nil {
		return false, store.Entry{}, err
	}
	return r.OK, fixEntry(r.Entry), nil
}

func (b *boltProc) Get(ctx context.Context, key string) (store.Entry, error) {
	r, err := b.do(ctx, Req{Kind: "get", Key: key})
	if err != nil {
		return store.Entry{}, err
	}
	return fixEntry(r.Entry), nil
}

func (b *boltProc) CompareAndSwap(ctx context.Context, key string, old, v []byte, _ time.Duration) (bool, error) {
	r, err := b.do(ctx, Req{Kind: "cas", Key: key, Old: old, Value: v})
	if err != nil {
		return false, err
	}
	return r.OK, nil
}

func (b *boltProc) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	r, err := b.do(ctx, Req{Kind: "cad", Key: key, Old: old})
	if err != nil {
		return false, err
	}
	return r.OK, nil
}

func (b *boltProc) Consume(ctx context.Context, key string) ([]byte, error) {
	r, err := b.do(ctx, Req{Kind: "consume", Key: key})
	if err != nil {
		return nil, err
	}
	return nonNil(r.Value), nil
}

func (b *boltProc) SetNXBatch(ctx context.Context, items []store.BatchItem) ([]store.BatchResult, error) {
	r, err := b.do(ctx, Req{Kind: "batch", Items: items})
	if err != nil {
		return nil, err
	}
	for i := range r.Results {
		if !r.Results[i].Set {
			r.Results[i].Existing = fixEntry(r.Results[i].Existing)
		}
	}
	return r.Results, nil
}

// gob sends an empty slice as nil; the store's values are never nil.
func nonNil(v []byte) []byte {
	if v == nil {
		return []byte{}
	}
	return v
}

func fixEntry(e store.Entry) store.Entry {
	e.Value = nonNil(e.Value)
	return e
}

// TestBoltstoreKilled runs the workload over a bbolt file held by a child
// process that the nemesis kills with SIGKILL and restarts.
func TestBoltstoreKilled(t *testing.T) {
	b := startBoltProc(t)
	kill := fault{
		name:   "sigkill",
		inject: func(*testing.T) { b.kill() },
		heal:   func(t *testing.T) { b.start(t) },
	}
	for _, f := range []fault{noFault, kill} {
		t.Run(f.name, func(t *testing.T) { runCase(t, "boltstore-process", b, f) })
	}
}
