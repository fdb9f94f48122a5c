package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// detailEnv, when set to 1, makes benchmarks log the Redis commands of
// each op with their calls and server time (stack-work.sh sets it).
const detailEnv = "IDEMKIT_BENCH_REDIS_DETAIL"

// When the Redis server runs under valgrind --tool=callgrind,
// stack-work.sh sets callgrindPidEnv to its pid and callgrindOutEnv to its
// --callgrind-out-file, and the serial benchmarks report the server's
// instructions per op (redis-instr/op).
const (
	callgrindPidEnv = "IDEMKIT_BENCH_CALLGRIND"
	callgrindOutEnv = "IDEMKIT_BENCH_CALLGRIND_OUT"
)

// redisWork is a snapshot of the work the Redis server has done: its main
// thread's CPU time (user + system, which includes reading requests and
// writing replies) and, since the last CONFIG RESETSTAT, INFO
// commandstats per command.
type redisWork struct {
	cpuUsec float64
	cmds    map[string]cmdStat
}

type cmdStat struct{ calls, usec float64 }

// adminClient is an uncounted client for INFO and CONFIG RESETSTAT.
func adminClient(tb testing.TB) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// startWork resets the command statistics and returns the first snapshot.
func startWork(tb testing.TB, rdb *redis.Client) redisWork {
	tb.Helper()
	if err := rdb.ConfigResetStat(context.Background()).Err(); err != nil {
		tb.Fatalf("CONFIG RESETSTAT: %v", err)
	}
	return readWork(tb, rdb)
}

func readWork(tb testing.TB, rdb *redis.Client) redisWork {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "cpu", "commandstats").Result()
	if err != nil {
		tb.Fatalf("INFO: %v", err)
	}
	w := redisWork{cmds: map[string]cmdStat{}}
	for line := range strings.Lines(info) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch {
		case name == "used_cpu_sys_main_thread", name == "used_cpu_user_main_thread":
			s, _ := strconv.ParseFloat(value, 64)
			w.cpuUsec += s * 1e6
		case strings.HasPrefix(name, "cmdstat_"):
			w.cmds[strings.TrimPrefix(name, "cmdstat_")] = parseCmdStat(value)
		}
	}
	return w
}

// parseCmdStat parses "calls=2,usec=5,usec_per_call=2.50,...".
func parseCmdStat(v string) cmdStat {
	var s cmdStat
	for field := range strings.SplitSeq(v, ",") {
		k, val, _ := strings.Cut(field, "=")
		f, _ := strconv.ParseFloat(val, 64)
		switch k {
		case "calls":
			s.calls = f
		case "usec":
			s.usec = f
		}
	}
	return s
}

// reportWork reports the server's main-thread CPU per op since start as
// redis-us/op and, with detailEnv set, logs every command's calls and
// usec per op. Commands run inside a script or MULTI are counted on their
// own as well as in EVALSHA or EXEC, so the command lines do not add up;
// redis-us/op is the total.
func reportWork(b *testing.B, rdb *redis.Client, start redisWork) {
	end := readWork(b, rdb)
	n := float64(b.N)
	b.ReportMetric((end.cpuUsec-start.cpuUsec)/n, "redis-us/op")
	if os.Getenv(detailEnv) != "1" {
		return
	}
	names := make([]string, 0, len(end.cmds))
	for name := range end.cmds {
		if name != "info" && name != "config|resetstat" && name != "config" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	var sb strings.Builder
	fmt.Fprintf(&sb, "redis work per op, %d ops: main thread %.2f µs;", b.N, (end.cpuUsec-start.cpuUsec)/n)
	for _, name := range names {
		s := end.cmds[name]
		fmt.Fprintf(&sb, " %s %.2f calls %.2f µs;", name, s.calls/n, s.usec/n)
	}
	b.Log(sb.String())
}

// callgrindZero zeroes the instruction counters of the Redis server run
// under callgrind (callgrindPidEnv), if any.
func callgrindZero(tb testing.TB) {
	tb.Helper()
	if pid := os.Getenv(callgrindPidEnv); pid != "" {
		callgrindControl(tb, "-z", pid)
	}
}

// reportInstructions dumps the counters of the Redis server run under
// callgrind, if any, and reports the instructions it executed since
// callgrindZero, per op, as redis-instr/op.
func reportInstructions(b *testing.B) {
	pid := os.Getenv(callgrindPidEnv)
	if pid == "" {
		return
	}
	callgrindControl(b, "-d", pid)
	// A dump is written as <out>.<n>, n counting up; the newest holds the
	// events since the last zeroing or dump.
	files, err := filepath.Glob(os.Getenv(callgrindOutEnv) + ".*")
	if err != nil || len(files) == 0 {
		b.Fatalf("no callgrind dump next to %s (%v)", os.Getenv(callgrindOutEnv), err)
	}
	slices.SortFunc(files, func(x, y string) int { return dumpNumber(x) - dumpNumber(y) })
	data, err := os.ReadFile(files[len(files)-1])
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "summary: "); ok {
			first, _, _ := strings.Cut(v, " ")
			n, err := strconv.ParseFloat(first, 64)
			if err != nil {
				b.Fatalf("callgrind summary %q: %v", v, err)
			}
			b.ReportMetric(n/float64(b.N), "redis-instr/op")
			return
		}
	}
	b.Fatalf("no summary line in %s", files[len(files)-1])
}

// callgrindControl runs callgrind_control with flag on pid.
func callgrindControl(tb testing.TB, flag, pid string) {
	tb.Helper()
	if out, err := exec.Command("callgrind_control", flag, pid).CombinedOutput(); err != nil {
		tb.Fatalf("callgrind_control %s %s: %v: %s", flag, pid, err, out)
	}
}

// dumpNumber returns n of a dump file named <out>.<n>.
func dumpNumber(path string) int {
	n, _ := strconv.Atoi(path[strings.LastIndexByte(path, '.')+1:])
	return n
}
