package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idemkit/internal/options/optionstest"
	"github.com/idemkit/idemkit/store/redisstore"
)

// optionCase is a list of options and what New makes of it: errs is nil
// when New accepts them, and otherwise what its error must say.
type optionCase struct {
	name, option string // option names the exported option the case covers
	client       redisstore.Client
	opts         []redisstore.Option
	errs         []string
}

// TestOptionsFollowTheOptionRule: every option of the package is accepted
// when valid and refused, naming itself, when not; a nil option is
// refused by its position counted from 1; every error is reported, not
// only the first; every error wraps store.ErrInvalid. New sends nothing,
// so no server is needed.
func TestOptionsFollowTheOptionRule(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = client.Close() })
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = cluster.Close() })
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	t.Cleanup(func() { _ = ring.Close() })
	readTimeout := client.Options().ReadTimeout

	cases := []optionCase{
		{name: "none"},
		{name: "prefix", option: "WithPrefix", opts: []redisstore.Option{redisstore.WithPrefix("idem:{orders}:")}},
		{name: "empty prefix", option: "WithPrefix", opts: []redisstore.Option{redisstore.WithPrefix("")}},
		{name: "wait", option: "WithWaitReplicas", opts: []redisstore.Option{redisstore.WithWaitReplicas(1, time.Second)}},
		{name: "wait on a cluster", option: "WithWaitReplicas", client: cluster, opts: []redisstore.Option{redisstore.WithWaitReplicas(2, time.Second)}},
		{name: "wait off", option: "WithWaitReplicas", client: ring, opts: []redisstore.Option{redisstore.WithWaitReplicas(0, 0)}},
		{name: "wait zero replicas", option: "WithWaitReplicas", opts: []redisstore.Option{redisstore.WithWaitReplicas(0, time.Second)},
			errs: []string{"WithWaitReplicas(0, 1s): "}},
		{name: "wait negative replicas", option: "WithWaitReplicas", opts: []redisstore.Option{redisstore.WithWaitReplicas(-1, time.Second)},
			errs: []string{"WithWaitReplicas(-1, 1s): "}},
		{name: "wait zero timeout", option: "WithWaitReplicas", opts: []redisstore.Option{redisstore.WithWaitReplicas(1, 0)},
			errs: []string{"WithWaitReplicas(1, 0s): "}},
		{name: "wait negative timeout", option: "WithWaitReplicas", opts: []redisstore.Option{redisstore.WithWaitReplicas(1, -time.Second)},
			errs: []string{"WithWaitReplicas(1, -1s): "}},
		{name: "wait over ReadTimeout", option: "WithWaitReplicas", opts: []redisstore.Option{redisstore.WithWaitReplicas(1, readTimeout)},
			errs: []string{"WithWaitReplicas: ", "ReadTimeout"}},
		{name: "wait on a ring", option: "WithWaitReplicas", client: ring, opts: []redisstore.Option{redisstore.WithWaitReplicas(1, time.Second)},
			errs: []string{"WithWaitReplicas: ", "*redis.Ring"}},
		{name: "nil", opts: []redisstore.Option{redisstore.WithPrefix("p:"), nil}, errs: []string{"redisstore: store: invalid argument: option 2 is nil"}},
		{name: "every error", opts: []redisstore.Option{nil, redisstore.WithWaitReplicas(0, time.Second), redisstore.WithPrefix("p:"), nil},
			errs: []string{"option 1 is nil", "WithWaitReplicas(0, 1s): ", "option 4 is nil"}},
	}
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		if c.client == nil {
			c.client = client
		}
		s, err := redisstore.New(c.client, c.opts...)
		if c.errs == nil {
			if err != nil || s == nil {
				t.Errorf("%s: New = %v, %v; want it accepted", c.name, s, err)
			}
			continue
		}
		if s != nil {
			t.Errorf("%s: New returned a Store with its error", c.name)
		}
		optionstest.Refused(t, c.name, err, c.errs...)
	}
	optionstest.Covered(t, optionstest.Exported(t, ".", "Option"), covered)
}
