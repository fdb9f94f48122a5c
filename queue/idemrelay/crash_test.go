package idemrelay_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit/queue/idemrelay"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// The child's settings, passed in its environment.
const (
	envChildDriver  = "IDEMRELAY_TEST_DRIVER"
	envChildDSN     = "IDEMRELAY_TEST_DSN"
	envChildRecords = "IDEMRELAY_TEST_RECORDS"
	envChildOutbox  = "IDEMRELAY_TEST_OUTBOX"
	envChildKillAt  = "IDEMRELAY_TEST_KILL_AT"
)

// runChild is the crash test's relay process: it relays batches and
// SIGKILLs itself between the broker's confirms of batch KILL_AT and
// the removal of its rows. It exits 3 when the outbox is empty first.
func runChild() int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "relay child:", err); return 2 }
	db, err := sql.Open(os.Getenv(envChildDriver), os.Getenv(envChildDSN))
	if err != nil {
		return fail(err)
	}
	d := sqlstore.Postgres
	if os.Getenv(envChildDriver) == "mysql" {
		d = sqlstore.MySQL
	}
	s, err := sqlstore.New(db, d, sqlstore.WithTable(os.Getenv(envChildRecords)), sqlstore.WithOutboxTable(os.Getenv(envChildOutbox)), sqlstore.WithoutSweeper())
	if err != nil {
		return fail(err)
	}
	nc, err := nats.Connect(natsURL())
	if err != nil {
		return fail(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	pub, err := idemrelay.NewJetStream(js)
	if err != nil {
		return fail(err)
	}
	killAt, _ := strconv.Atoi(os.Getenv(envChildKillAt))
	batches := 0
	r, err := idemrelay.New(s, pub, idemrelay.WithBatchSize(20), idemrelay.WithAfterPublish(func([]string) {
		if batches++; batches == killAt {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}))
	if err != nil {
		return fail(err)
	}
	for {
		rep := r.Once(context.Background())
		if rep.Err != nil {
			return fail(rep.Err)
		}
		if rep.Claimed == 0 {
			return 3
		}
	}
}

// TestJetStreamRelayKilledBetweenPublishAndRemoval runs relay processes
// that each SIGKILL themselves between the broker's confirm of a batch
// and the removal of its rows, one after another, then drains the rest in
// this process. Every killed batch is published again by the next relay
// and dropped by the stream as a duplicate (Nats-Msg-Id): the stream holds
// each committed event exactly once, and nothing is lost.
func TestJetStreamRelayKilledBetweenPublishAndRemoval(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			records, outbox := fmt.Sprintf("crec%d", tables.Add(1)), fmt.Sprintf("cob%d", tables.Add(1))
			s := openOutbox(t, b, records, outbox, true)
			js := connect(t)
			stream, subject := newStream(t, js)
			const events, kills = 300, 6
			ids := enqueue(t, b, s, subject, 0, events)
			killed := 0
			for i := range kills {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), envChild+"=1", envChildDriver+"="+b.driver, envChildDSN+"="+b.dsn,
					envChildRecords+"="+records, envChildOutbox+"="+outbox, envChildKillAt+"="+strconv.Itoa(1+i%3))
				out, err := cmd.CombinedOutput()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("relay child %d: %v, want killed by SIGKILL; output:\n%s", i, err, out)
				}
				killed++
			}
			pub, err := idemrelay.NewJetStream(js)
			if err != nil {
				t.Fatal(err)
			}
			r, err := idemrelay.New(s, pub, idemrelay.WithPollInterval(10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			sum := runRelays(t, s, []*idemrelay.Relay{r})
			counts, stored := streamCounts(t, stream)
			lost := 0
			for id := range ids {
				if counts[id] == 0 {
					lost++
				}
			}
			dups := 0
			for _, n := range counts {
				dups += n - 1
			}
			if stored != events || len(counts) != events || lost != 0 || dups != 0 {
				t.Fatalf("stream holds %d messages of %d ids; %d events lost, %d stored twice; want %d once each",
					stored, len(counts), lost, dups, events)
			}
			if sum.Duplicates == 0 {
				t.Fatalf("the draining relay met no duplicate: the last killed batch was not re-published")
			}
			t.Logf("%s: %d events, %d relays killed after a confirm, 0 lost, 0 stored twice; the last relay dropped %d re-published copies",
				b.name, events, killed, sum.Duplicates)
		})
	}
}
