package boltstore

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/idemkit/idemkit/store"
)

// The bolt scheme: importing this package lets store.Open open
//
//	bolt:///var/lib/app/idem.db        an absolute path
//	bolt://data/idem.db                a path relative to the working directory
//	bolt:///idem.db?nosync=true&open_timeout=5s&bucket=orders
//
// Parameters: nosync (true or false: WithNoSync), open_timeout (how long
// to wait for the file lock: WithOpenTimeout, default 1s),
// bucket (WithBucket), sweep_interval (WithSweepInterval; 0s turns the
// sweeper off) and sweep_batch (WithSweepBatch). The store opened owns
// its file: Close closes it.
func init() {
	store.Register("bolt", func(_ context.Context, u *url.URL) (store.Store, error) {
		c, err := parseURL(u)
		if err != nil {
			return nil, err
		}
		return Open(c.Path, c.Options()...)
	})
}

// URLConfig is what a bolt:// URL asks for. Programs that open the bbolt
// file themselves, to keep their own buckets beside the store's, use it
// with bolt.Open and New; others call store.Open.
type URLConfig struct {
	// Path is the file's path.
	Path string
	// NoSync is the nosync parameter (false when absent).
	NoSync bool
	// OpenTimeout is the open_timeout parameter (DefaultOpenTimeout when
	// absent).
	OpenTimeout time.Duration
	// Bucket is the bucket parameter (DefaultBucket when absent).
	Bucket string
	// SweepInterval and SweepBatch are the sweep_interval and sweep_batch
	// parameters (their defaults when absent).
	SweepInterval time.Duration
	SweepBatch    int
}

// Options returns the options Open takes for c.
func (c *URLConfig) Options() []Option {
	opts := append([]Option{WithOpenTimeout(c.OpenTimeout), WithBucket(c.Bucket)}, c.SweepOptions()...)
	if c.NoSync {
		opts = append(opts, WithNoSync())
	}
	return opts
}

// SweepOptions returns the options of c that New takes, those of the
// sweeper: New refuses the file's options (open timeout, bucket, nosync),
// which the caller applies when it opens the DB.
func (c *URLConfig) SweepOptions() []Option {
	if c.SweepInterval <= 0 {
		return []Option{WithoutSweeper(), WithSweepBatch(c.SweepBatch)}
	}
	return []Option{WithSweepInterval(c.SweepInterval), WithSweepBatch(c.SweepBatch)}
}

// ParseURL parses a bolt:// URL (see the package documentation of the
// scheme above). A URL it cannot use is an error wrapping store.ErrInvalid
// that names the problem.
func ParseURL(rawURL string) (*URLConfig, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "bolt" {
		return nil, fmt.Errorf("boltstore: %w: %s is not a bolt:// URL", store.ErrInvalid, store.Redact(rawURL))
	}
	return parseURL(u)
}

// parseURL reads the file path and parameters of a bolt URL.
func parseURL(u *url.URL) (*URLConfig, error) {
	c, err := urlConfig(u)
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", store.Redact(u.String()), err)
	}
	return c, nil
}

func urlConfig(u *url.URL) (*URLConfig, error) {
	c := &URLConfig{
		Path:          u.Host + u.Path,
		OpenTimeout:   DefaultOpenTimeout,
		Bucket:        DefaultBucket,
		SweepInterval: DefaultSweepInterval,
		SweepBatch:    DefaultSweepBatch,
	}
	switch {
	case u.User != nil || u.Port() != "" || u.Fragment != "":
		return nil, fmt.Errorf("%w: a bolt URL names a file: bolt:///absolute/path.db or bolt://relative/path.db, with no user, port or fragment", store.ErrInvalid)
	case u.Opaque != "" || c.Path == "":
		return nil, fmt.Errorf("%w: a bolt URL needs a file: bolt:///absolute/path.db or bolt://relative/path.db", store.ErrInvalid)
	}
	p := store.NewParams(u)
	var err error
	if c.NoSync, _, err = p.Bool("nosync"); err != nil {
		return nil, err
	}
	if d, ok, err := p.Duration("open_timeout", time.Millisecond); err != nil {
		return nil, err
	} else if ok {
		c.OpenTimeout = d
	}
	if b, ok, err := p.String("bucket"); err != nil {
		return nil, err
	} else if ok {
		if b == "" {
			return nil, fmt.Errorf("%w: parameter bucket is empty", store.ErrInvalid)
		}
		c.Bucket = b
	}
	if d, ok, err := p.Duration("sweep_interval", 0); err != nil {
		return nil, err
	} else if ok {
		c.SweepInterval = d
	}
	if n, ok, err := p.Int("sweep_batch", 1); err != nil {
		return nil, err
	} else if ok {
		if n > MaxSweepBatch {
			return nil, fmt.Errorf("%w: parameter sweep_batch=%d: at most %d", store.ErrInvalid, n, MaxSweepBatch)
		}
		c.SweepBatch = n
	}
	return c, p.Done()
}
