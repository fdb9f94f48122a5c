package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/idemkit/idemkit/store"
)

// The schemes this package registers with store.Open:
//
//	redis://[user:password@]host[:port][/db][?params]           standalone
//	rediss://...                                                standalone over TLS
//	redis+sentinel://[user:password@]host:port[,host:port...]/mastername[?params]
//	rediss+sentinel://...                                       Sentinel over TLS
//	redis+cluster://[user:password@]host:port[,host:port...][?params]
//	rediss+cluster://...                                        Cluster over TLS
//
// go-redis parses each (redis.ParseURL, redis.ParseFailoverURL,
// redis.ParseClusterURL), so every parameter it documents works: db,
// dial_timeout, read_timeout, write_timeout, pool_size, pool_timeout,
// min_idle_conns, max_retries, skip_verify (TLS), client_name and so on.
// In a Sentinel URL the user and password are the sentinels' and the
// parameters username and password the data nodes'. idemkit adds, and
// removes before go-redis sees the rest:
//
//	prefix=P                   WithPrefix(P)
//	wait_replicas=N            WithWaitReplicas(N, wait_timeout)
//	wait_timeout=D             the timeout of WithWaitReplicas (default 100ms)
//
// A parameter given twice, an unknown one, or one go-redis refuses is an
// error naming it. Unless the URL says otherwise the client is made with
// MaxRetries -1 (no command is retried: a retried write may have been
// applied already), ContextTimeoutEnabled (the caller's deadline bounds
// every command) and maintenance notifications off, and (standalone and
// Cluster) with a dialer that retries a Redis that refused its last
// connection every 20 ms while the caller waits, so the client answers
// again within milliseconds of Redis coming back instead of at go-redis's
// next one-second redial (see Redialer). The client belongs to the store:
// URLStore.Close closes it.
func init() {
	for _, scheme := range []string{"redis", "rediss", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster"} {
		store.Register(scheme, func(ctx context.Context, u *url.URL) (store.Store, error) {
			return openURL(ctx, u)
		})
	}
}

// DefaultURLWaitTimeout is the timeout of wait_replicas when a URL gives
// no wait_timeout.
const DefaultURLWaitTimeout = 100 * time.Millisecond

// URLStore is a Store opened from a URL (see OpenURL). It owns the go-redis
// client it made: Close closes it.
type URLStore struct {
	*Store
	client   redis.UniversalClient
	redacted string
}

var (
	_ store.Store  = (*URLStore)(nil)
	_ store.Closer = (*URLStore)(nil)
	_ store.Pinger = (*URLStore)(nil)
)

// Client returns the go-redis client the store uses and owns.
func (s *URLStore) Client() redis.UniversalClient { return s.client }

// Close closes the client.
func (s *URLStore) Close() error { return s.client.Close() }

// String returns the URL the store was opened from, its secrets hidden.
func (s *URLStore) String() string { return s.redacted }

// OpenURL opens a Store from a URL of one of the schemes above, as
// store.Open does, and returns its concrete type. It sends nothing to
// Redis: ping the store (Ping) to learn whether Redis answers. Errors wrap
// store.ErrInvalid and never hold a password.
func OpenURL(ctx context.Context, rawURL string) (*URLStore, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redisstore: open %s: %w: not a URL", store.Redact(rawURL), store.ErrInvalid)
	}
	return openURL(ctx, u)
}

func openURL(_ context.Context, u *url.URL) (*URLStore, error) {
	redacted := scrub(store.Redact(u.String()), u)
	c, opts, err := parseRedisURL(u)
	if err != nil {
		return nil, fmt.Errorf("redisstore: open %s: %w", redacted, err)
	}
	client := c.newClient()
	s, err := New(client, opts...)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("redisstore: open %s: %w", redacted, err), client.Close())
	}
	return &URLStore{Store: s, client: client, redacted: redacted}, nil
}

// parseRedisURL returns the client options and the Store options u asks
// for.
func parseRedisURL(u *url.URL) (*clientOptions, []Option, error) {
	base, topology, _ := strings.Cut(u.Scheme, "+")
	if err := checkShape(u, topology); err != nil {
		return nil, nil, err
	}
	all, err := store.Query(u)
	if err != nil {
		return nil, nil, err
	}
	q, opts, err := ownParams(all)
	if err != nil {
		return nil, nil, err
	}
	hosts, err := splitHosts(u.Host, topology)
	if err != nil {
		return nil, nil, err
	}
	g := &url.URL{Scheme: base, User: u.User, Host: hosts[0]}
	for _, h := range hosts[1:] {
		q.Add("addr", h)
	}
	if topology == "sentinel" {
		if q.Has("master_name") {
			return nil, nil, fmt.Errorf("%w: parameter master_name: a Sentinel URL names its master in the path: %s://host:26379/mymaster", store.ErrInvalid, u.Scheme)
		}
		q.Set("master_name", strings.TrimPrefix(u.Path, "/"))
	} else {
		g.Path = u.Path
	}
	defaults := applyDefaults(q)
	g.RawQuery = q.Encode()
	c, err := parseClient(g, topology, defaults)
	if err != nil {
		return nil, nil, hideSecrets(err, u)
	}
	return c, opts, nil
}

// checkShape refuses what no topology accepts: fragments, opaque URLs,
// a user without a password (most often a password written where the
// user goes), a Sentinel URL without a master name, a path on a cluster.
func checkShape(u *url.URL, topology string) error {
	switch {
	case u.Opaque != "":
		return fmt.Errorf("%w: write %s://host:port, not %s:host", store.ErrInvalid, u.Scheme, u.Scheme)
	case u.Fragment != "":
		return fmt.Errorf("%w: a Redis URL has no #fragment", store.ErrInvalid)
	case u.User != nil && u.User.Username() != "" && !hasPassword(u):
		return fmt.Errorf("%w: the URL gives a user but no password; for a password alone write %s://:PASSWORD@host", store.ErrInvalid, u.Scheme)
	case topology == "sentinel" && (u.Path == "" || u.Path == "/" || strings.Count(u.Path, "/") > 1):
		return fmt.Errorf("%w: a Sentinel URL names its master: %s://host:26379,host:26380/mymaster", store.ErrInvalid, u.Scheme)
	case topology == "cluster" && u.Path != "" && u.Path != "/":
		return fmt.Errorf("%w: a Cluster URL has no path (a cluster has only database 0)", store.ErrInvalid)
	}
	return nil
}

func hasPassword(u *url.URL) bool {
	_, ok := u.User.Password()
	return ok
}

// splitHosts splits the comma-separated host list of u, each host:port
// checked, defaulting the port. Standalone URLs take one host.
func splitHosts(hostList, topology string) ([]string, error) {
	defPort := "6379"
	if topology == "sentinel" {
		defPort = "26379"
	}
	parts := strings.Split(hostList, ",")
	if topology == "" && len(parts) > 1 {
		return nil, fmt.Errorf("%w: several hosts need redis+cluster:// or redis+sentinel://", store.ErrInvalid)
	}
	hosts := make([]string, 0, len(parts))
	for _, h := range parts {
		hp, err := checkHost(h, defPort)
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, hp)
	}
	return hosts, nil
}

// checkHost returns h as host:port, the port defaulted, or an error when
// the host is empty or the port is not a number from 1 to 65535.
func checkHost(h, defPort string) (string, error) {
	if h == "" {
		if defPort == "6379" {
			return "localhost:6379", nil
		}
		return "", fmt.Errorf("%w: empty host in the host list", store.ErrInvalid)
	}
	host, port, err := net.SplitHostPort(h)
	if err != nil {
		host, port = strings.Trim(h, "[]"), defPort
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%w: host %q: port must be a number from 1 to 65535", store.ErrInvalid, h)
	}
	if host == "" || strings.ContainsAny(host, "[]:") && net.ParseIP(host) == nil {
		return "", fmt.Errorf("%w: host %q is not host:port", store.ErrInvalid, h)
	}
	return net.JoinHostPort(host, port), nil
}

// ownParams takes idemkit's parameters out of q, returning the rest, and
// refuses a parameter given twice (go-redis would keep the last silently),
// except addr, which go-redis takes as a list.
func ownParams(q url.Values) (url.Values, []Option, error) {
	for name, vs := range q {
		if len(vs) > 1 && name != "addr" {
			return nil, nil, fmt.Errorf("%w: parameter %q given %d times", store.ErrInvalid, name, len(vs))
		}
	}
	p := store.NewParams(&url.URL{RawQuery: q.Encode()})
	var opts []Option
	if prefix, ok, _ := p.String("prefix"); ok {
		opts = append(opts, WithPrefix(prefix))
	}
	n, hasN, err := p.Int("wait_replicas", 1)
	if err != nil {
		return nil, nil, err
	}
	timeout, hasT, err := p.Duration("wait_timeout", time.Millisecond)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case hasT && !hasN:
		return nil, nil, fmt.Errorf("%w: parameter wait_timeout needs wait_replicas", store.ErrInvalid)
	case hasN && !hasT:
		timeout = DefaultURLWaitTimeout
	}
	if hasN {
		opts = append(opts, WithWaitReplicas(n, timeout))
	}
	for _, name := range []string{"prefix", "wait_replicas", "wait_timeout"} {
		q.Del(name)
	}
	return q, opts, nil
}

// urlDefaults are the client settings idemkit chooses where the URL is
// silent.
type urlDefaults struct {
	noRetries bool // the URL gives no max_retries
}

// applyDefaults notes which defaults of idemkit's apply to q.
func applyDefaults(q url.Values) urlDefaults {
	return urlDefaults{noRetries: !q.Has("max_retries")}
}

// clientOptions holds the go-redis options of one topology: exactly one
// field is set.
type clientOptions struct {
	standalone *redis.Options
	failover   *redis.FailoverOptions
	cluster    *redis.ClusterOptions
}

// parseClient parses g with go-redis's parser for topology and applies
// idemkit's defaults.
func parseClient(g *url.URL, topology string, d urlDefaults) (*clientOptions, error) {
	maint := &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	retries := func(n *int) {
		if d.noRetries {
			*n = -1
		}
	}
	var c clientOptions
	var err error
	switch topology {
	case "":
		if c.standalone, err = redis.ParseURL(g.String()); err == nil {
			c.standalone.ContextTimeoutEnabled, c.standalone.MaintNotificationsConfig = true, maint
			c.standalone.Dialer = newRedialer(netDialer(c.standalone.TLSConfig)).Dial
			retries(&c.standalone.MaxRetries)
		}
	case "sentinel":
		if c.failover, err = redis.ParseFailoverURL(g.String()); err == nil {
			// No redialer: go-redis asks the sentinels for the master's
			// address before each dial, and a redialer would keep polling
			// the address of a master that died (and may come back as a
			// replica) instead of asking again.
			c.failover.ContextTimeoutEnabled = true
			retries(&c.failover.MaxRetries)
		}
	case "cluster":
		if c.cluster, err = redis.ParseClusterURL(g.String()); err == nil {
			c.cluster.ContextTimeoutEnabled, c.cluster.MaintNotificationsConfig = true, maint
			c.cluster.Dialer = newRedialer(netDialer(c.cluster.TLSConfig)).Dial
			retries(&c.cluster.MaxRetries)
		}
	default:
		err = fmt.Errorf("unknown Redis topology %q (redis+sentinel or redis+cluster)", topology)
	}
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// newClient makes the client c describes.
func (c *clientOptions) newClient() redis.UniversalClient {
	switch {
	case c.failover != nil:
		return redis.NewFailoverClient(c.failover)
	case c.cluster != nil:
		return redis.NewClusterClient(c.cluster)
	}
	return redis.NewClient(c.standalone)
}

// hideSecrets turns an error of go-redis's URL parsing into one wrapping
// store.ErrInvalid whose text holds none of u's secrets: go-redis quotes
// some values, and url.Error quotes the whole URL.
func hideSecrets(err error, u *url.URL) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	return fmt.Errorf("%w: %s", store.ErrInvalid, scrub(err.Error(), u))
}

// scrub replaces in msg every secret of u: its password, the values of
// its password parameters, and a user given without a password, which is
// most often a password written in the wrong place. store.Redact hides
// them where they belong; scrub also where they do not (a password pasted
// into another parameter, quoted back by a parser).
func scrub(msg string, u *url.URL) string {
	var secrets []string
	if u.User != nil {
		if pw, ok := u.User.Password(); ok {
			secrets = append(secrets, pw)
		} else {
			secrets = append(secrets, u.User.Username())
		}
	}
	for name, vs := range u.Query() {
		if strings.Contains(strings.ToLower(name), "password") {
			secrets = append(secrets, vs...)
		}
	}
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for _, form := range []string{s, url.QueryEscape(s), url.PathEscape(s), url.UserPassword("", s).String()[1:]} {
			msg = strings.ReplaceAll(msg, form, "xxxxx")
		}
	}
	return msg
}
