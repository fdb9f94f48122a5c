package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name the sentinels of StartSentinel
// monitor.
const SentinelMaster = "mymaster"

// Sentinel is a primary, one replica and three sentinels (redis-server
// --sentinel) monitoring them with a quorum of 2. The sentinels mark the
// primary down after 500 ms without an answer and fail over to the
// replica.
type Sentinel struct {
	Primary, Replica *Server
	Sentinels        []*Server
}

// StartSentinel starts a Sentinel set-up on free loopback ports and waits
// until every sentinel monitors the primary, knows the replica and knows
// the two other sentinels, failing the test after a bounded time. All the
// processes are killed when the test ends. opts apply to the primary and
// the replica.
func StartSentinel(tb testing.TB, opts ...Option) *Sentinel {
	tb.Helper()
	st := &Sentinel{}
	st.Primary, st.Replica = StartReplicated(tb, opts...)
	for range 3 {
		st.Sentinels = append(st.Sentinels, startSentinelProcess(tb, st.Primary))
	}
	st.waitMonitoring(tb)
	return st
}

// startSentinelProcess starts one sentinel monitoring primary.
func startSentinelProcess(tb testing.TB, primary *Server) *Server {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		s := &Server{tb: tb, bin: lookPath(tb, "redis-server"), port: freePort(tb, false), dir: tb.TempDir()}
		conf := filepath.Join(s.dir, "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 2\n"+
			"sentinel down-after-milliseconds %[1]s 500\n"+
			"sentinel failover-timeout %[1]s 5000\n"+
			"sentinel parallel-syncs %[1]s 1\n", SentinelMaster, primary.Port())
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			tb.Fatalf("redistest: writing %s: %v", conf, err)
		}
		// The configuration file comes first; sentinel rewrites it.
		s.args = []string{conf, "--sentinel",
			"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--protected-mode", "no",
			"--daemonize", "no", "--dir", s.dir, "--logfile", s.logPath()}
		tb.Cleanup(s.Stop)
		err := s.start()
		if err == nil {
			return s
		}
		if attempt == startAttempts || !s.portTaken(err) {
			s.fatal(err)
		}
	}
}

// waitMonitoring waits until each sentinel sees the primary as master with
// one replica and two other sentinels.
func (st *Sentinel) waitMonitoring(tb testing.TB) {
	tb.Helper()
	for _, s := range st.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
		err := waitFor("sentinel "+s.Addr(), func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			m, err := c.Master(ctx, SentinelMaster).Result()
			if err != nil {
				return err
			}
			if m["port"] != strconv.Itoa(st.Primary.Port()) || strings.Contains(m["flags"], "down") {
				return fmt.Errorf("master %s:%s flags %s", m["ip"], m["port"], m["flags"])
			}
			if m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" {
				return fmt.Errorf("%s replicas, %s other sentinels", m["num-slaves"], m["num-other-sentinels"])
			}
			return nil
		})
		_ = c.Close()
		if err != nil {
			tb.Fatalf("redistest: %v\n%s", err, s.logTail())
		}
	}
}

// Addrs returns the sentinels' addresses.
func (st *Sentinel) Addrs() []string {
	addrs := make([]string, len(st.Sentinels))
	for i, s := range st.Sentinels {
		addrs[i] = s.Addr()
	}
	return addrs
}

// URL returns a redis+sentinel:// URL of the set-up, with query appended
// when not empty (for example "prefix=t:").
func (st *Sentinel) URL(query string) string {
	u := "redis+sentinel://" + strings.Join(st.Addrs(), ",") + "/" + SentinelMaster
	if query != "" {
		u += "?" + query
	}
	return u
}

// MasterAddr returns the primary's address as the first sentinel that
// answers reports it, or "" when none answers.
func (st *Sentinel) MasterAddr() string {
	for _, s := range st.Sentinels {
		c := redis.NewSentinelClient(&redis.Options{Addr: s.Addr()})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		addr, err := c.GetMasterAddrByName(ctx, SentinelMaster).Result()
		cancel()
		_ = c.Close()
		if err == nil && len(addr) == 2 {
			return addr[0] + ":" + addr[1]
		}
	}
	return ""
}
