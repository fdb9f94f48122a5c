package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
	"github.com/idemkit/idemkit/store/storetest"
)

const urlSecret = "s3cr3t-PASS"

func TestOpenURLRefusals(t *testing.T) {
	pw := ":" + urlSecret + "@"
	cases := map[string]string{
		"redis://" + pw + "h:70000":                                                "port must be a number",
		"redis://" + pw + "h:0":                                                    "port must be a number",
		"redis://" + pw + "h:notaport":                                             "invalid",
		"redis://" + pw + "h1:1,h2:2":                                              "several hosts",
		"redis://" + pw + "h/abc":                                                  "invalid database number",
		"redis://" + pw + "h/1/2":                                                  "invalid URL path",
		"redis://" + pw + "h?pool_size=x":                                          "pool_size",
		"redis://" + pw + "h?dial_timeout=" + urlSecret:                            "dial_timeout",
		"redis://" + pw + "h?bogus=1":                                              "bogus",
		"redis://" + pw + "h?password=" + urlSecret:                                "password",
		"redis://" + pw + "h?skip_verify=true":                                     "skip_verify",
		"redis://" + pw + "h?pool_size=1&pool_size=2":                              `"pool_size" given 2 times`,
		"redis://" + pw + "h?prefix=a&prefix=b":                                    `"prefix" given 2 times`,
		"redis://" + pw + "h?wait_replicas=0":                                      "wait_replicas",
		"redis://" + pw + "h?wait_replicas=x":                                      "wait_replicas",
		"redis://" + pw + "h?wait_timeout=1s":                                      "wait_timeout needs wait_replicas",
		"redis://" + pw + "h?wait_replicas=1&wait_timeout=0s":                      "wait_timeout",
		"redis://" + pw + "h?wait_replicas=1&wait_timeout=10s":                     "ReadTimeout",
		"redis://" + urlSecret + "@h":                                              "user but no password",
		"redis://" + pw + "h#frag":                                                 "fragment",
		"redis:" + urlSecret:                                                       "not redis:host",
		"redis+sentinel://" + pw + "s1:26379":                                      "names its master",
		"redis+sentinel://" + pw + "s1:26379/m/x":                                  "names its master",
		"redis+sentinel://" + pw + "s1:26379/m?master_name=x":                      "master_name",
		"redis+sentinel://" + pw + "s1:26379/m?password=" + urlSecret + "&bogus=1": "bogus",
		"redis+sentinel://" + pw + "s1:26379/m?skip_verify=1":                      "skip_verify",
		"redis+sentinel://" + pw + "s1:26379,:26380/m":                             "is not host:port",
		"redis+cluster://" + pw + "h:1,h:2/0":                                      "no path",
		"redis+cluster://" + pw + "h:1,h:2?db=1":                                   "db",
		"redis+cluster://" + pw + "h:1,h:99999":                                    "port must be a number",
		"redis+unix://" + pw + "h":                                                 `"redis+unix"`,
	}
	for rawURL, want := range cases {
		s, err := store.Open(context.Background(), rawURL)
		if !errors.Is(err, store.ErrInvalid) {
			t.Errorf("Open(%q) = %v, %v; want an error wrapping store.ErrInvalid", rawURL, s, err)
			if c, ok := s.(store.Closer); ok {
				c.Close()
			}
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q): %q does not name %q", rawURL, err, want)
		}
		if strings.Contains(err.Error(), urlSecret) {
			t.Errorf("Open(%q): error leaks the secret: %q", rawURL, err)
		}
	}
}

func TestOpenURLStringHidesThePassword(t *testing.T) {
	s, err := redisstore.OpenURL(context.Background(), "redis://app:"+urlSecret+"@h:1/0?prefix=p:")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.String(); strings.Contains(got, urlSecret) || !strings.Contains(got, "app:xxxxx@h:1") {
		t.Errorf("String() = %q", got)
	}
	if got := fmt.Sprint(s); strings.Contains(got, urlSecret) {
		t.Errorf("fmt.Sprint = %q", got)
	}
	if _, err := redisstore.OpenURL(context.Background(), "redis://:"+urlSecret+"@h:x%zz"); err == nil || strings.Contains(err.Error(), urlSecret) {
		t.Errorf("OpenURL of a bad URL = %v", err)
	}
}

// startWithPassword starts a server that requires urlSecret (set after
// start: redistest checks readiness without a password).
func startWithPassword(t *testing.T) *redistest.Server {
	srv := redistest.Start(t)
	if err := srv.Client(t).ConfigSet(context.Background(), "requirepass", urlSecret).Err(); err != nil {
		t.Fatal(err)
	}
	return srv
}

func TestOpenURLConformanceStandalone(t *testing.T) {
	srv := startWithPassword(t)
	n := 0
	storetest.Run(t, func(t *testing.T) store.Store {
		n++
		s, err := store.Open(context.Background(), fmt.Sprintf("redis://:%s@%s/1?prefix=conf%d:&pool_size=16", urlSecret, srv.Addr(), n))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.(store.Closer).Close() })
		return s
	})
}

func TestOpenURLConformanceCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	n := 0
	storetest.Run(t, func(t *testing.T) store.Store {
		n++
		s, err := store.Open(context.Background(), fmt.Sprintf("redis+cluster://%s?prefix=conf%d:", strings.Join(cl.Addrs(), ","), n))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.(store.Closer).Close() })
		return s
	})
}

func TestOpenURLWrongPasswordIsNotUnavailable(t *testing.T) {
	srv := startWithPassword(t)
	s, err := redisstore.OpenURL(context.Background(), "redis://:wrong-"+urlSecret+"@"+srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Ping(context.Background())
	if err == nil || strings.Contains(err.Error(), urlSecret) {
		t.Fatalf("Ping with a wrong password = %v", err)
	}
}

// Open a Store from a redis:// URL. go-redis parses the URL (user,
// password, database, TLS with rediss://, pool and timeouts); idemkit adds
// prefix and wait_replicas. Nothing is sent to Redis until the first call.
func Example_openURL() {
	s, err := store.Open(context.Background(), "redis://:secret@localhost:6379/0?prefix=shop:&dial_timeout=1s")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.(store.Closer).Close()
	fmt.Println(s)
	// Output: redis://:xxxxx@localhost:6379/0?prefix=shop:&dial_timeout=1s
}

// A Sentinel URL lists the sentinels and names the master; its user
// information is the sentinels', the password parameter the data nodes'.
func Example_openURLSentinel() {
	s, err := store.Open(context.Background(),
		"redis+sentinel://:sentinelpass@10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/mymaster?password=datapass&db=0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.(store.Closer).Close()
	fmt.Println(s)
}

// A Cluster URL lists seed nodes; the client discovers the others.
func Example_openURLCluster() {
	s, err := store.Open(context.Background(), "rediss+cluster://app:secret@node1:7000,node2:7000,node3:7000?prefix=idem:")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.(store.Closer).Close()
	fmt.Println(s)
}

func TestOpenURLConformanceSentinel(t *testing.T) {
	st := redistest.StartSentinel(t)
	n := 0
	storetest.Run(t, func(t *testing.T) store.Store {
		n++
		s, err := store.Open(context.Background(), st.URL(fmt.Sprintf("prefix=conf%d:", n)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.(store.Closer).Close() })
		return s
	})
}

// A store opened from a Sentinel URL follows failovers: after the primary
// dies and the sentinels promote the replica, calls succeed again and see
// what was replicated; after the old primary came back as a replica and
// the new primary died in turn, the same client writes again (it must not
// stay on the old address, which now answers READONLY).
func TestOpenURLSentinelFollowsFailover(t *testing.T) {
	st := redistest.StartSentinel(t)
	s, err := redisstore.OpenURL(context.Background(), st.URL("prefix=fo:"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if set, _, err := s.SetNX(ctx, "k", []byte("v"), time.Hour); err != nil || !set {
		t.Fatalf("SetNX before the failover = %v, %v", set, err)
	}
	st.Primary.Stop()
	waitWritable(t, s, "the first failover")
	if e, err := s.Get(ctx, "k"); err != nil || string(e.Value) != "v" {
		t.Fatalf("after the failover Get = %q, %v", e.Value, err)
	}
	waitMaster(t, st, st.Replica)
	// Repeated failovers with long-lived clients are TestFailoverLoss's:
	// restarting the old primary here raced the sentinels' reconfiguration
	// on a loaded machine (they flapped between the two nodes).
}

// waitMaster waits until the sentinels name want as the master (a sentinel
// learns of a failover another one led within seconds), failing the test
// after 30 s.
func waitMaster(t *testing.T, st *redistest.Sentinel, want *redistest.Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for st.MasterAddr() != want.Addr() {
		if time.Now().After(deadline) {
			t.Fatalf("the sentinels name %s as master, want %s", st.MasterAddr(), want.Addr())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitWritable writes fresh keys through s until one is acknowledged,
// failing the test after 30 s.
func waitWritable(t *testing.T, s store.Store, after string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for n := 0; ; n++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _, err := s.SetNX(ctx, fmt.Sprint("w", n, after), []byte("v"), time.Hour)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write acknowledged 30s after %s: %v", after, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A client you make yourself recovers as fast as one opened from a URL
// when its Dialer is a Redialer.
func ExampleRedialer() {
	opts := &redis.Options{Addr: "localhost:6379", MaxRetries: -1, ContextTimeoutEnabled: true}
	opts.Dialer = redisstore.Redialer(opts.TLSConfig)
	client := redis.NewClient(opts)
	defer client.Close()
	s, err := redisstore.New(client)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = s
}
