package redisstore_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store/redisstore"
)

// Environment of TestRedisWork, which bench/redis-work.sh sets.
const (
	workEnv         = "REDISSTORE_WORK"           // "1" runs the test
	workAddrEnv     = "REDISSTORE_WORK_ADDR"      // a server to measure (default: one of its own)
	workOpsEnv      = "REDISSTORE_WORK_OPS"       // operations per scenario (default 20000)
	workKeyLenEnv   = "REDISSTORE_WORK_KEYLEN"    // the claim scenarios' key names padded to this many bytes (default: unpadded, about 8)
	workCallgrind   = "REDISSTORE_WORK_CALLGRIND" // pid of a redis-server run under valgrind --tool=callgrind
	workCallgrindTo = "REDISSTORE_WORK_CALLGRIND_OUT"
)

// workScenario is one kind of operation whose cost to Redis is measured:
// op(i) runs the i-th operation; setup, if set, runs before the counters
// are zeroed. INFO commandstats counts the commands run inside a script
// or EXEC as well as the script or EXEC, whose time includes theirs: sent
// names those whose time adds up to the operation's.
type workScenario struct {
	name  string
	sent  []string // the commands the client sends (not those run inside them)
	setup func(n int)
	op    func(i int) error
}

// TestRedisWork measures what each kind of operation costs the Redis
// server (not the client): the server's CPU time (INFO cpu) and the time
// of each command (INFO commandstats) per operation, and, when the server
// runs under callgrind, its instructions per operation. It compares a
// replay (SetNX on a present key) and a first execution (SetNX on an
// absent key, then CompareAndSwap, as the engine completes it) through
// the Lua scripts and through the plain commands, against a plain GET,
// and the same with SetNXValue, the claim the engine's Do makes.
// It also reports this process's CPU time per operation (the client's
// side: go-redis and the Store, plus the loop). It is skipped unless
// REDISSTORE_WORK=1; see bench/redis-work.sh.
func TestRedisWork(t *testing.T) {
	if os.Getenv(workEnv) != "1" {
		t.Skipf("set %s=1 to measure Redis's work per operation (bench/redis-work.sh)", workEnv)
	}
	addr := os.Getenv(workAddrEnv)
	if addr == "" {
		addr = redistest.Start(t).Addr()
	}
	n := 20000
	if v := os.Getenv(workOpsEnv); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, workOpsEnv)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, PoolSize: 1})
	t.Cleanup(func() { _ = c.Close() })
	fmt.Printf("redis-server %s, %d operations per scenario, one client, one connection\n", serverVersion(t, c), n)
	fmt.Printf("%-28s %10s %10s %12s %10s  %s\n", "scenario", "cpu-us/op", "cmd-us/op", "instr/op", "client-us", "commandstats per op (calls usec)")
	var floor float64
	for _, sc := range workScenarios(t, c) {
		m := measureWork(t, c, sc, n)
		if sc.name == "GET (floor)" {
			floor = m.instr
		}
		ratio := ""
		if floor > 0 && m.instr > 0 {
			ratio = fmt.Sprintf(" (%.2fx GET)", m.instr/floor)
		}
		fmt.Printf("%-28s %10.2f %10.2f %12.0f %10.2f  %s%s\n", sc.name, m.cpu, m.cmd, m.instr, m.client, m.stats, ratio)
	}
}

// workScenarios returns the scenarios, each on keys of its own.
func workScenarios(t *testing.T, c *redis.Client) []workScenario {
	value := []byte(strings.Repeat("v", 200)) // about a small stored response
	claim := []byte(strings.Repeat("c", 40))  // about a claim record
	store := func(prefix string, scripts bool) *redisstore.Store {
		s, err := redisstore.New(c, redisstore.WithPrefix(prefix))
		require.NoError(t, err)
		require.NoError(t, s.LoadScripts(ctxb))
		if scripts {
			redisstore.UseScripts(s)
		}
		return s
	}
	keyLen := 0
	if v := os.Getenv(workKeyLenEnv); v != "" {
		var err error
		keyLen, err = strconv.Atoi(v)
		require.NoError(t, err, workKeyLenEnv)
	}
	// name pads base so that a scenario's key name (a 3-byte prefix and
	// the key) is keyLen bytes long, as the engine's names are (42 bytes
	// with the default namespace; 67 before they were shortened).
	name := func(base string) string {
		return strings.Repeat("x", max(0, keyLen-3-len(base))) + base
	}
	key := func(i int) string { return name("k" + strconv.Itoa(i)) }
	done := name("done")
	replay := func(s *redisstore.Store) workScenario {
		return workScenario{
			setup: func(int) { _, _, _ = s.SetNX(ctxb, done, value, time.Hour) },
			op: func(int) error {
				set, _, err := s.SetNX(ctxb, done, claim, time.Hour)
				if err == nil && set {
					err = fmt.Errorf("replay stored")
				}
				return err
			},
		}
	}
	// The engine's Do claims with SetNXValue, which reads no TTL.
	replayValue := func(s *redisstore.Store) workScenario {
		return workScenario{
			setup: func(int) { _, _, _ = s.SetNX(ctxb, done, value, time.Hour) },
			op: func(int) error {
				set, _, err := s.SetNXValue(ctxb, done, claim, time.Hour)
				if err == nil && set {
					err = fmt.Errorf("replay stored")
				}
				return err
			},
		}
	}
	firstValue := func(s *redisstore.Store) workScenario {
		return workScenario{op: func(i int) error {
			set, _, err := s.SetNXValue(ctxb, key(i), claim, time.Hour)
			if err != nil || !set {
				return fmt.Errorf("claim: set=%v err=%v", set, err)
			}
			ok, err := s.CompareAndSwap(ctxb, key(i), claim, value, time.Hour)
			if err != nil || !ok {
				return fmt.Errorf("complete: ok=%v err=%v", ok, err)
			}
			return nil
		}}
	}
	first := func(s *redisstore.Store) workScenario {
		return workScenario{op: func(i int) error {
			set, _, err := s.SetNX(ctxb, key(i), claim, time.Hour)
			if err != nil || !set {
				return fmt.Errorf("claim: set=%v err=%v", set, err)
			}
			ok, err := s.CompareAndSwap(ctxb, key(i), claim, value, time.Hour)
			if err != nil || !ok {
				return fmt.Errorf("complete: ok=%v err=%v", ok, err)
			}
			return nil
		}}
	}
	get := workScenario{
		name:  "GET (floor)",
		sent:  []string{"get"},
		setup: func(int) { c.Set(ctxb, "floor", value, time.Hour) },
		op:    func(int) error { return c.Get(ctxb, "floor").Err() },
	}
	// What a replay would cost without reading the TTL (which the store
	// contract requires, atomically with the value): a reference only.
	setGet := workScenario{
		name:  "SET NX GET alone (ref)",
		sent:  []string{"set"},
		setup: func(int) { c.Set(ctxb, "ref", value, time.Hour) },
		op: func(int) error {
			return c.Do(ctxb, "set", "ref", claim, "nx", "px", 3600000, "get").Err()
		},
	}
	scenarios := []workScenario{get, setGet}
	lua, tx, one := []string{"evalsha"}, []string{"multi", "exec", "evalsha"}, []string{"set", "evalsha"}
	for _, sc := range []struct {
		name string
		sent []string
		s    workScenario
	}{
		{"replay, Lua (before)", lua, replay(store("rl:", true))},
		{"replay, MULTI/EXEC (after)", tx, replay(store("rt:", false))},
		{"first exec, Lua (before)", lua, first(store("fl:", true))},
		{"replay, SetNXValue (Do)", one, replayValue(store("rv:", false))},
		{"first exec, MULTI (after)", tx, first(store("ft:", false))},
		{"first exec, SetNXValue (Do)", one, firstValue(store("fv:", false))},
	} {
		sc.s.name, sc.s.sent = sc.name, sc.sent
		scenarios = append(scenarios, sc.s)
	}
	return scenarios
}

// work is what one scenario cost the server per operation.
type work struct {
	cpu    float64 // used_cpu_user + used_cpu_sys, microseconds
	client float64 // this process's CPU time (the client's), microseconds
	cmd    float64 // sum of the usec of the commands the client sent (not those run inside them)
	instr  float64 // instructions (callgrind), or 0
	stats  string  // every command's calls and usec per operation
}

// measureWork runs sc n times after a warm-up and returns its cost.
func measureWork(t *testing.T, c *redis.Client, sc workScenario, n int) work {
	if sc.setup != nil {
		sc.setup(n)
	}
	for i := range min(n, 100) { // warm-up, on keys the measured run does not reuse
		require.NoError(t, sc.op(-1-i), sc.name)
	}
	require.NoError(t, c.ConfigResetStat(ctxb).Err())
	callgrind(t, "-z")
	cpu0 := serverCPU(t, c)
	self0 := processCPU(t)
	for i := range n {
		require.NoError(t, sc.op(i), sc.name)
	}
	self1 := processCPU(t)
	instr := callgrind(t, "-d")
	cpu1 := serverCPU(t, c)
	stats := commandStats(t, c)
	var m work
	m.cpu = (cpu1 - cpu0) / float64(n)
	m.client = (self1 - self0) / float64(n)
	m.instr = instr / float64(n)
	var parts []string
	for _, name := range slices.Sorted(mapKeys(stats)) {
		if name == "info" || name == "config|resetstat" {
			continue
		}
		st := stats[name]
		if slices.Contains(sc.sent, name) {
			m.cmd += st.usec / float64(n)
		}
		parts = append(parts, fmt.Sprintf("%s %.2g %.2f", name, st.calls/float64(n), st.usec/float64(n)))
	}
	m.stats = strings.Join(parts, ", ")
	return m
}

type cmdStat struct{ calls, usec float64 }

// commandStats parses INFO commandstats.
func commandStats(t *testing.T, c *redis.Client) map[string]cmdStat {
	info, err := c.Info(ctxb, "commandstats").Result()
	require.NoError(t, err)
	out := map[string]cmdStat{}
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		var st cmdStat
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			x, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				st.calls = x
			case "usec":
				st.usec = x
			}
		}
		out[name] = st
	}
	return out
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// serverCPU returns the server's CPU time so far, in microseconds.
func serverCPU(t *testing.T, c *redis.Client) float64 {
	info, err := c.Info(ctxb, "cpu").Result()
	require.NoError(t, err)
	var total float64
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := strconv.ParseFloat(infoValue(info, f), 64)
		require.NoError(t, err, f)
		total += v
	}
	return total * 1e6
}

// processCPU returns this process's CPU time so far, in microseconds.
func processCPU(t *testing.T) float64 {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e3
}

// serverVersion returns the server's redis_version.
func serverVersion(t *testing.T, c *redis.Client) string {
	info, err := c.Info(ctxb, "server").Result()
	require.NoError(t, err)
	return infoValue(info, "redis_version")
}

func infoValue(info, name string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// callgrind runs callgrind_control with flag (-z zeroes the counters, -d
// dumps them) on the server named by REDISSTORE_WORK_CALLGRIND, and after
// a dump returns the instructions counted since the last zeroing; without
// that variable it does nothing and returns 0.
func callgrind(t *testing.T, flag string) float64 {
	pid := os.Getenv(workCallgrind)
	if pid == "" {
		return 0
	}
	out, err := exec.Command("callgrind_control", flag, pid).CombinedOutput()
	require.NoError(t, err, "callgrind_control %s %s: %s", flag, pid, out)
	if flag != "-d" {
		return 0
	}
	// Dumps are written as <out>.<n>; the newest holds the totals.
	files, err := filepath.Glob(os.Getenv(workCallgrindTo) + ".*")
	require.NoError(t, err)
	require.NotEmpty(t, files, "no callgrind dump next to %s", os.Getenv(workCallgrindTo))
	slices.SortFunc(files, func(a, b string) int { return dumpNumber(a) - dumpNumber(b) })
	data, err := os.ReadFile(files[len(files)-1])
	require.NoError(t, err)
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "summary: "); ok {
			first, _, _ := strings.Cut(v, " ")
			n, err := strconv.ParseFloat(first, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no summary line in %s", files[len(files)-1])
	return 0
}

// dumpNumber returns n of a dump file named <out>.<n>.
func dumpNumber(path string) int {
	n, _ := strconv.Atoi(path[strings.LastIndexByte(path, '.')+1:])
	return n
}
