package redisstore

import (
	"net/url"
	"slices"
	"testing"
	"time"
)

func mustParse(t *testing.T, rawURL string) (*clientOptions, *config) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	c, opts, err := parseRedisURL(u)
	if err != nil {
		t.Fatalf("parseRedisURL(%q) = %v", rawURL, err)
	}
	s := &config{}
	for _, o := range opts {
		if err := o(s); err != nil {
			t.Fatalf("parseRedisURL(%q): option: %v", rawURL, err)
		}
	}
	return c, s
}

func TestParseRedisURLStandalone(t *testing.T) {
	c, s := mustParse(t, "rediss://app:pw@cache.example:6380/3?pool_size=7&dial_timeout=250ms&read_timeout=2s&write_timeout=1s&pool_timeout=4s&min_idle_conns=2&client_name=api&prefix=idem:{o}:&wait_replicas=1&wait_timeout=50ms")
	o := c.standalone
	if o == nil || c.failover != nil || c.cluster != nil {
		t.Fatalf("topology: %+v", c)
	}
	if o.Addr != "cache.example:6380" || o.Username != "app" || o.Password != "pw" || o.DB != 3 ||
		o.PoolSize != 7 || o.DialTimeout != 250*time.Millisecond || o.ReadTimeout != 2*time.Second ||
		o.WriteTimeout != time.Second || o.PoolTimeout != 4*time.Second || o.MinIdleConns != 2 || o.ClientName != "api" {
		t.Errorf("options: %+v", o)
	}
	if o.TLSConfig == nil || o.TLSConfig.ServerName != "cache.example" {
		t.Errorf("rediss: TLS config %+v", o.TLSConfig)
	}
	if !o.ContextTimeoutEnabled || o.MaxRetries != -1 {
		t.Errorf("defaults: ContextTimeoutEnabled %v, MaxRetries %d", o.ContextTimeoutEnabled, o.MaxRetries)
	}
	if s.prefix != "idem:{o}:" || s.waitN != 1 || s.waitTimeout != 50*time.Millisecond {
		t.Errorf("store options: prefix %q, wait %d %v", s.prefix, s.waitN, s.waitTimeout)
	}
}

func TestParseRedisURLDefaults(t *testing.T) {
	for rawURL, want := range map[string]string{
		"redis://":            "localhost:6379",
		"redis://:pw@h":       "h:6379",
		"redis://h:7000/":     "h:7000",
		"redis://[::1]:7000/": "[::1]:7000",
	} {
		c, s := mustParse(t, rawURL)
		if c.standalone.Addr != want || c.standalone.TLSConfig != nil || c.standalone.DB != 0 {
			t.Errorf("%s: Addr %q TLS %v DB %d", rawURL, c.standalone.Addr, c.standalone.TLSConfig, c.standalone.DB)
		}
		if s.prefix != "" || s.waitN != 0 {
			t.Errorf("%s: store options %+v", rawURL, s)
		}
	}
	c, s := mustParse(t, "redis://h?max_retries=2&wait_replicas=2")
	if c.standalone.MaxRetries != 2 || s.waitN != 2 || s.waitTimeout != DefaultURLWaitTimeout {
		t.Errorf("max_retries %d, wait %d %v", c.standalone.MaxRetries, s.waitN, s.waitTimeout)
	}
	c, _ = mustParse(t, "redis://h?db=5")
	if c.standalone.DB != 5 {
		t.Errorf("db=5: DB %d", c.standalone.DB)
	}
}

func TestParseRedisURLSentinel(t *testing.T) {
	c, s := mustParse(t, "rediss+sentinel://:spw@s1:26379,s2,s3:26381/mymaster?db=2&username=app&password=dpw&prefix=p:")
	o := c.failover
	if o == nil {
		t.Fatalf("topology: %+v", c)
	}
	if o.MasterName != "mymaster" || !slices.Equal(o.SentinelAddrs, []string{"s1:26379", "s2:26379", "s3:26381"}) ||
		o.SentinelPassword != "spw" || o.Username != "app" || o.Password != "dpw" || o.DB != 2 {
		t.Errorf("options: %+v", o)
	}
	if o.TLSConfig == nil || !o.ContextTimeoutEnabled || o.MaxRetries != -1 || s.prefix != "p:" {
		t.Errorf("TLS %v, ContextTimeoutEnabled %v, MaxRetries %d, prefix %q", o.TLSConfig, o.ContextTimeoutEnabled, o.MaxRetries, s.prefix)
	}
}

func TestParseRedisURLCluster(t *testing.T) {
	c, _ := mustParse(t, "redis+cluster://u:pw@n1:7000,n2:7001,n3:7002?read_timeout=1s&pool_size=3")
	o := c.cluster
	if o == nil {
		t.Fatalf("topology: %+v", c)
	}
	if !slices.Equal(o.Addrs, []string{"n1:7000", "n2:7001", "n3:7002"}) || o.Username != "u" || o.Password != "pw" ||
		o.ReadTimeout != time.Second || o.PoolSize != 3 || o.TLSConfig != nil || !o.ContextTimeoutEnabled || o.MaxRetries != -1 {
		t.Errorf("options: %+v", o)
	}
}
