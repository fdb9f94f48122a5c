package linear_test

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/linear"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// clientChildEnv names the variable that makes the test binary a client
// process: it records its part of a history as its value (a clientJob in
// JSON) says, and writes the part to the job's Out file.
const clientChildEnv = "IDEMKIT_LINEAR_CLIENT_CHILD"

// clientJob is one client process's part of a history: the store to
// reach and the workload, of the store (Work) or of the engine (Engine,
// when not nil), with the Origin every process of the history shares.
type clientJob struct {
	Store  string // "redis" (Addr: host:port) or "postgres" (Addr: DSN, Table)
	Addr   string
	Table  string
	Work   linear.Workload
	Engine *linear.EngineWorkload
	Out    string
}

// clientPart is what a client process writes: its operations (MarshalOps)
// and its figures.
type clientPart struct {
	Ops         json.RawMessage
	Stats       linear.Stats
	EngineStats linear.EngineStats
	Err         string
}

// clientChild runs the job in its variable and exits.
func clientChild(spec string) int {
	var job clientJob
	if err := json.Unmarshal([]byte(spec), &job); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	s, closeStore, err := openJobStore(job)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	defer closeStore()
	var part clientPart
	var ops []porcupine.Operation
	var rerr error
	if job.Engine != nil {
		ops, part.EngineStats, rerr = linear.RunEngine(s, *job.Engine)
		part.Ops, err = linear.MarshalOps[linear.ClaimInput, linear.ClaimOutput](ops)
	} else {
		ops, part.Stats, rerr = linear.Run(s, job.Work)
		part.Ops, err = linear.MarshalOps[linear.Input, linear.Output](ops)
	}
	if rerr != nil {
		part.Err = rerr.Error()
	}
	data, jerr := json.Marshal(part)
	if err = errors.Join(err, jerr); err == nil {
		err = os.WriteFile(job.Out, data, 0o600)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 2
	}
	return 0
}

func openJobStore(job clientJob) (store.Store, func(), error) {
	switch job.Store {
	case "redis":
		client := redis.NewClient(redisOptions(job.Addr))
		s, err := redisstore.New(client)
		return s, func() { _ = client.Close() }, err
	case "postgres":
		db, err := sql.Open("pgx", job.Addr)
		if err != nil {
			return nil, nil, err
		}
		db.SetMaxOpenConns(4)
		s, err := sqlstore.New(db, sqlstore.Postgres, sqlstore.WithTable(job.Table))
		return s, func() { _ = db.Close() }, err
	}
	return nil, nil, fmt.Errorf("unknown store %q", job.Store)
}

// clientProcs are the client processes of one history.
type clientProcs struct {
	mu    sync.Mutex
	cmds  []*exec.Cmd
	outs  []string
	alive []bool
}

// start starts one client process per job, each writing to a file of dir.
func startClientProcs(t *testing.T, dir string, jobs []clientJob) *clientProcs {
	cp := &clientProcs{}
	for i, job := range jobs {
		job.Out = filepath.Join(dir, fmt.Sprintf("part%d.json", i))
		spec, err := json.Marshal(job)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), clientChildEnv+"="+string(spec))
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cp.cmds, cp.outs, cp.alive = append(cp.cmds, cmd), append(cp.outs, job.Out), append(cp.alive, true)
	}
	return cp
}

// wait waits for every process and closes done.
func (cp *clientProcs) wait(t *testing.T, done chan<- struct{}) {
	defer close(done)
	for i, cmd := range cp.cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("client process %d: %v", i, err)
		}
		cp.mu.Lock()
		cp.alive[i] = false
		cp.mu.Unlock()
	}
}

// signal sends sig to the process i, unless it has ended.
func (cp *clientProcs) signal(t *testing.T, i int, sig syscall.Signal) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if !cp.alive[i] {
		return
	}
	if err := cp.cmds[i].Process.Signal(sig); err != nil {
		t.Errorf("client process %d: %v: %v", i, sig, err)
	}
}

// pauses is the fault of SIGSTOP and SIGCONT: one client process, drawn
// at random, stopped until the nemesis heals it.
func (cp *clientProcs) pauses() fault {
	var stopped int
	return fault{
		name: "sigstop",
		inject: func(t *testing.T) {
			stopped = rand.IntN(len(cp.cmds))
			cp.signal(t, stopped, syscall.SIGSTOP)
		},
		heal: func(t *testing.T) { cp.signal(t, stopped, syscall.SIGCONT) },
	}
}

// parts reads what each process wrote.
func (cp *clientProcs) parts(t *testing.T) []clientPart {
	var parts []clientPart
	for _, out := range cp.outs {
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("a client process wrote no part: %v", err)
		}
		var p clientPart
		if err := json.Unmarshal(data, &p); err != nil {
			t.Fatal(err)
		}
		if p.Err != "" {
			t.Errorf("client process: %s", p.Err)
		}
		parts = append(parts, p)
	}
	return parts
}

// pauseProcs is the number of client processes of a history.
const pauseProcs = 3

// runPausedCase records histories whose clients are pauseProcs processes
// (each running job's workload with its own seed, on the same keys) while
// the nemesis stops one of them with SIGSTOP for 100 to 900ms, past the
// engine's lease, and continues it; the parts are merged and checked
// against the model (linear.EngineModel when job.Engine is set).
func runPausedCase(t *testing.T, storeName string, job clientJob) {
	p := planFor(t)
	count := 1
	if p.budget > 0 {
		count = 1 << 30
	}
	start := time.Now()
	var total linear.Stats
	var etotal linear.EngineStats
	histories, injected, ops := 0, 0, 0
	for h := 0; (h < count || (job.Engine != nil && etotal.Lost == 0 && h < 3)) && (p.budget == 0 || time.Since(start) < p.budget); h++ {
		// The short version records one history, or up to three for the
		// engine until a stopped owner's completion is refused.
		origin := time.Now().Round(0) // a wall clock reading, shared by the processes
		prefix := fmt.Sprintf("pause:%s:%s:%d:", runID, storeName, h)
		jobs := make([]clientJob, pauseProcs)
		for i := range jobs {
			j := job
			if j.Engine != nil {
				e := *j.Engine
				e.Prefix, e.Seed, e.Origin = prefix, rand.Uint64(), origin
				j.Engine = &e
			} else {
				j.Work.Prefix, j.Work.Seed, j.Work.Origin = prefix, rand.Uint64(), origin
			}
			jobs[i] = j
		}
		cp := startClientProcs(t, t.TempDir(), jobs)
		done := make(chan struct{})
		go cp.wait(t, done)
		injected += nemesis(t, cp.pauses(), done)
		var opsParts [][]porcupine.Operation
		for _, part := range cp.parts(t) {
			var o []porcupine.Operation
			var err error
			if job.Engine != nil {
				o, err = linear.UnmarshalOps[linear.ClaimInput, linear.ClaimOutput](part.Ops)
				etotal.Add(part.EngineStats)
			} else {
				o, err = linear.UnmarshalOps[linear.Input, linear.Output](part.Ops)
				total.Add(part.Stats)
			}
			if err != nil {
				t.Fatal(err)
			}
			opsParts = append(opsParts, o)
		}
		merged := linear.Merge(opsParts...)
		ops += len(merged)
		name := fmt.Sprintf("%s-sigstop-%d", storeName, h)
		if job.Engine != nil {
			linear.CheckModelT(t, linear.EngineModel, merged, "engine-"+name)
		} else {
			linear.CheckT(t, merged, name)
		}
		histories++
	}
	if job.Engine != nil {
		t.Logf("RESULT engine store=%s fault=sigstop processes=%d histories=%d ops=%d admitted=%d completed=%d leaselost=%d replayed=%d unknown=%d faults=%d linearizable=%v time=%v",
			storeName, pauseProcs, histories, ops, etotal.Admitted, etotal.Completed, etotal.Lost, etotal.Replayed, etotal.Unknown, injected, !t.Failed(), time.Since(start).Round(time.Millisecond))
		if etotal.Lost == 0 {
			t.Errorf("no Complete returned ErrLeaseLost: no pause outlived a claim's lease, the run checked little")
		}
		return
	}
	t.Logf("RESULT store=%s fault=sigstop processes=%d histories=%d ops=%d unknown=%d notsent=%d faults=%d linearizable=%v time=%v",
		storeName, pauseProcs, histories, ops, total.Unknown, total.NotSent, injected, !t.Failed(), time.Since(start).Round(time.Millisecond))
}

// TestPausedClientProcesses runs the clients as separate processes (the
// test binary, re-executed) and pauses them with SIGSTOP past the
// engine's lease: the store's workload on Redis, and the engine's claims
// on Redis and PostgreSQL. A paused engine client's heartbeat stops with
// it, so its key is taken over and its Complete must be refused.
func TestPausedClientProcesses(t *testing.T) {
	t.Parallel() // its own server or data: runs beside the other parallel cases
	p := planFor(t)
	srv := redistest.Start(t, redistest.WithArgs("--appendonly", "yes", "--appendfsync", "always"))
	work := p.work
	work.Clients = 2
	work.MaxOps = 1 << 20
	t.Run("redisstore", func(t *testing.T) {
		runPausedCase(t, "redisstore", clientJob{Store: "redis", Addr: srv.Addr(), Work: work})
	})
	ew := engineWork
	ew.Clients, ew.Engines, ew.Keys, ew.Paused = 2, 1, 2*pauseProcs, true
	if p.budget > 0 {
		ew.Duration = 5 * time.Second
	}
	t.Run("engine-redisstore", func(t *testing.T) {
		runPausedCase(t, "redisstore", clientJob{Store: "redis", Addr: srv.Addr(), Engine: &ew})
	})
	t.Run("engine-postgres", func(t *testing.T) {
		longOnly(t)
		name := fmt.Sprintf("idemkit_linear_pause_%d_%s", os.Getpid(), randHex(4))
		c := setupPostgres(t, name)
		stmts, err := sqlstore.Schema(c.dialect, "idem")
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range stmts {
			if _, err := c.db.Exec(st); err != nil {
				t.Fatalf("%s: %v", st, err)
			}
		}
		runPausedCase(t, "postgres", clientJob{Store: "postgres", Addr: c.directDSN, Table: "idem", Engine: &ew})
	})
}
