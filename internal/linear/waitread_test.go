package linear_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemkit/idemkit/internal/linear"
	"github.com/idemkit/idemkit/internal/redistest"
	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/redisstore"
)

// probe records the operations of a hand-made history.
type probe struct {
	start time.Time
	ops   []porcupine.Operation
}

// add records one operation called at call; err decides its outcome as
// the workload does: nil or ErrNotFound is a definite answer, anything
// else unknown (answered at the history's end by close).
func (p *probe) add(client int, in linear.Input, out linear.Output, call time.Time, err error) {
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		out = linear.Output{Unknown: true}
	}
	p.ops = append(p.ops, porcupine.Operation{ClientId: client, Input: in, Output: out,
		Call: int64(call.Sub(p.start)), Return: int64(time.Since(p.start))})
}

func (p *probe) close() []porcupine.Operation {
	end := int64(time.Since(p.start)) + 1
	for i := range p.ops {
		if p.ops[i].Output.(linear.Output).Unknown {
			p.ops[i].Return = end
		}
	}
	return p.ops
}

// runWaitReadCase shows the anomaly of Sentinel failover with WAIT: WAIT
// confirms writes, not reads. With the replication link cut, a write's
// WAIT fails (ErrNotReplicated: an unknown outcome, the write happened on
// the primary), but a read on the primary sees that write, and answers
// definitely: a Get reads the value, a SetNX reports the key taken. The
// failover then loses the write, and the history contradicts the reads:
// after a Get of "b" the key holds "a" again with nothing writing "a"
// between, and after a SetNX was told the key was taken, a SetNX on the
// empty key wins. The case fails unless the history of both keys is
// reported not linearizable, so it fails if redisstore ever confirms what
// reads report, or the harness stops cutting the link.
func runWaitReadCase(t *testing.T, st *redistest.Sentinel) {
	s, err := redisstore.OpenURL(context.Background(), st.URL(fmt.Sprintf("prefix=wr:%s:&wait_replicas=1&wait_timeout=100ms", runID)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	primary, replica := st.Primary, st.Replica
	if agreedMaster(t, st, "") == replica.Addr() {
		primary, replica = replica, primary
	}
	redistest.WaitReplicaUp(t, primary, replica)
	p := &probe{start: time.Now()}
	ctx := context.Background()
	in := func(k linear.Kind, key, old, v string) linear.Input {
		return linear.Input{Kind: k, Key: key, Old: old, Value: v}
	}

	// Before the cut: "a" stored on k1 and confirmed.
	call := time.Now()
	set, _, err := s.SetNX(ctx, "k1", []byte("a"), linear.TTL)
	if err != nil || !set {
		t.Fatalf("SetNX(k1, a) before the cut: set %v, %v; want set and confirmed", set, err)
	}
	p.add(1, in(linear.SetNX, "k1", "", "a"), linear.Output{OK: true}, call, nil)

	cutLink(t, primary)
	cut := time.Now()

	// During the cut: writes unconfirmed, reads of them definite.
	call = time.Now()
	_, err = s.CompareAndSwap(ctx, "k1", []byte("a"), []byte("b"), linear.TTL)
	if !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("CAS(k1, a→b) during the cut: %v, want ErrNotReplicated", err)
	}
	p.add(2, in(linear.CompareAndSwap, "k1", "a", "b"), linear.Output{}, call, err)
	call = time.Now()
	ent, err := s.Get(ctx, "k1")
	if err != nil || string(ent.Value) != "b" {
		t.Fatalf("Get(k1) during the cut: %q, %v; want b", ent.Value, err)
	}
	p.add(3, in(linear.Get, "k1", "", ""), linear.Output{OK: true, Value: "b"}, call, nil)
	call = time.Now()
	set, _, err = s.SetNX(ctx, "k2", []byte("x"), linear.TTL)
	if !set || !errors.Is(err, redisstore.ErrNotReplicated) {
		t.Fatalf("SetNX(k2, x) during the cut: set %v, %v; want set and ErrNotReplicated", set, err)
	}
	p.add(4, in(linear.SetNX, "k2", "", "x"), linear.Output{}, call, err)
	call = time.Now()
	set, ent, err = s.SetNX(ctx, "k2", []byte("y"), linear.TTL)
	if err != nil || set || string(ent.Value) != "x" {
		t.Fatalf("SetNX(k2, y) during the cut: set %v, %q, %v; want the key taken by x", set, ent.Value, err)
	}
	p.add(5, in(linear.SetNX, "k2", "", "y"), linear.Output{Value: "x"}, call, nil)

	killed, took := killPrimary(t, st, primary, replica)
	redistest.WaitReplicaUp(t, replica, primary) // so that writes are confirmed again

	// After the failover, on the promoted replica.
	retry := func(op func() error) (time.Time, error) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			call := time.Now()
			err := op()
			if err == nil || errors.Is(err, store.ErrNotFound) || time.Now().After(deadline) {
				return call, err
			}
			time.Sleep(20 * time.Millisecond) // a failed read changes nothing
		}
	}
	call, err = retry(func() (err error) { ent, err = s.Get(ctx, "k1"); return err })
	if err != nil || string(ent.Value) != "a" {
		t.Fatalf("Get(k1) after the failover: %q, %v; want a (the unconfirmed swap lost)", ent.Value, err)
	}
	p.add(6, in(linear.Get, "k1", "", ""), linear.Output{OK: true, Value: "a"}, call, nil)
	call = time.Now()
	set, _, err = s.SetNX(ctx, "k2", []byte("z"), linear.TTL)
	if err != nil || !set {
		t.Fatalf("SetNX(k2, z) after the failover: set %v, %v; want set (x lost)", set, err)
	}
	p.add(7, in(linear.SetNX, "k2", "", "z"), linear.Output{OK: true}, call, nil)

	ops := p.close()
	res, path, err := linear.Check(ops, "sentinel-wait-read")
	if err != nil {
		t.Fatal(err)
	}
	if res != porcupine.Illegal {
		t.Fatalf("the history of reads of unconfirmed writes lost in a failover is %v, want Illegal", res)
	}
	keys := linear.IllegalKeys(linear.Model, ops)
	if want := []string{"k1", "k2"}; !slices.Equal(keys, want) {
		t.Errorf("keys not linearizable: %v, want %v", keys, want)
	}
	fo := failoverTimes{cut: cut, killed: killed, took: took}
	// Without the answers given during the cut, nothing contradicts.
	if res, _, err := linear.Check(withoutReads(ops, cut.Sub(p.start), killed.Sub(p.start)), "sentinel-wait-read-without-reads"); err != nil || res != porcupine.Ok {
		t.Errorf("without the reads during the cut, the history is %v (%v), want Ok", res, err)
	}
	explainIllegal(t, linear.Model, ops, fo, p.start)
	t.Logf("RESULT store=redisstore-sentinel variant=wait-read linearizable=false (as expected) failover=%v visualization: %s",
		took.Round(time.Millisecond), path)
}
