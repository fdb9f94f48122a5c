package memstore

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/idemkit/idemkit/internal/layout"
	"github.com/idemkit/idemkit/store"
)

// The mem scheme: importing this package lets store.Open open
//
//	mem://[?capacity=N][&max_bytes=N][&shards=N][&sweep_interval=D][&scope_quota=N]
//
// capacity is the most entries kept (WithCapacity, default
// DefaultCapacity), max_bytes the most bytes (WithMaxBytes, default
// DefaultMaxBytes), shards the number of locked shards (WithShards),
// sweep_interval the period of the janitor that removes expired entries
// (WithSweepInterval; default 1m, 0s for none) and scope_quota the most
// entries of one scope, as the engine's key layout names it
// (WithScopeQuota with the engine's idemkit.ScopeOf; default none). The
// URL takes no host, path or user: an in-memory store is private to the
// process.
func init() {
	store.Register("mem", openURL)
}

// defaultURLSweep is the janitor period of a store opened by URL: a
// process that opens its store from configuration runs for long, and
// without a janitor expired entries would hold memory until touched.
const defaultURLSweep = time.Minute

// openURL opens a Store from a mem:// URL.
func openURL(_ context.Context, u *url.URL) (store.Store, error) {
	opts, err := urlOptions(u)
	if err != nil {
		return nil, fmt.Errorf("memstore: open %s: %w", store.Redact(u.String()), err)
	}
	s, err := New(opts...)
	if err != nil {
		return nil, fmt.Errorf("memstore: open %s: %w", store.Redact(u.String()), err)
	}
	return s, nil
}

// URLOptions returns the options a mem:// URL asks for (see the scheme
// above), for a program that adds options of its own, such as WithOnEvict,
// before calling New. A URL it cannot use is an error wrapping
// store.ErrInvalid that names the problem.
func URLOptions(rawURL string) ([]Option, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "mem" {
		return nil, fmt.Errorf("memstore: %w: %s is not a mem:// URL", store.ErrInvalid, store.Redact(rawURL))
	}
	opts, err := urlOptions(u)
	if err != nil {
		return nil, fmt.Errorf("memstore: open %s: %w", store.Redact(u.String()), err)
	}
	return opts, nil
}

// urlOptions returns the options a mem:// URL asks for.
func urlOptions(u *url.URL) ([]Option, error) {
	if u.Opaque != "" || u.Host != "" || u.Path != "" || u.User != nil || u.Fragment != "" {
		return nil, fmt.Errorf("%w: a mem URL has no user, host, path or fragment: write mem:// or mem://?capacity=N", store.ErrInvalid)
	}
	p := store.NewParams(u)
	var opts []Option
	if n, ok, err := p.Int("capacity", 1); err != nil {
		return nil, err
	} else if ok {
		opts = append(opts, WithCapacity(n))
	}
	if n, ok, err := p.Int("max_bytes", 1); err != nil {
		return nil, err
	} else if ok {
		opts = append(opts, WithMaxBytes(int64(n)))
	}
	if n, ok, err := p.Int("shards", 1); err != nil {
		return nil, err
	} else if ok {
		if n > maxShards {
			return nil, fmt.Errorf("%w: parameter shards=%d: at most %d", store.ErrInvalid, n, maxShards)
		}
		opts = append(opts, WithShards(n))
	}
	if n, ok, err := p.Int("scope_quota", 1); err != nil {
		return nil, err
	} else if ok {
		opts = append(opts, WithScopeQuota(n, layout.ScopeOf))
	}
	sweep, ok, err := p.Duration("sweep_interval", 0)
	if err != nil {
		return nil, err
	}
	if !ok {
		sweep = defaultURLSweep
	}
	if sweep > 0 {
		opts = append(opts, WithSweepInterval(sweep))
	}
	return opts, p.Done()
}
