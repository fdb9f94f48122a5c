package idemrelay_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
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
	envChildMode    = "IDEMRELAY_TEST_MODE"    // "relay" (the default), "run" or "enqueue"
	envChildSubject = "IDEMRELAY_TEST_SUBJECT" // enqueue: the subject
	envChildFrom    = "IDEMRELAY_TEST_FROM"    // enqueue: the first order
)

// runChild is a crash test's child process. In mode "relay" it relays
// batches and SIGKILLs itself between the broker's confirms of batch
// KILL_AT and the removal of its rows, exiting 3 when the outbox is empty
// first; in mode "run" it relays until its parent kills it; in mode
// "enqueue" it commits 10 events from order FROM, then enqueues 10 more
// in a transaction and SIGKILLs itself before the commit.
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
	if os.Getenv(envChildMode) == "enqueue" {
		return fail(enqueueAndDie(s, db))
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
	if os.Getenv(envChildMode) == "run" {
		r, err := idemrelay.New(s, pub, idemrelay.WithBatchSize(20), idemrelay.WithPollInterval(5*time.Millisecond))
		if err != nil {
			return fail(err)
		}
		return fail(r.Run(context.Background())) // until killed
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
				out, err := child(b, records, outbox, "relay", envChildKillAt+"="+strconv.Itoa(1+i%3)).CombinedOutput()
				killedBySIGKILL(t, fmt.Sprint("relay child ", i), err, out)
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

// enqueueAndDie commits the events of orders FROM to FROM+9, then
// enqueues those of FROM+10 to FROM+19 in a transaction and SIGKILLs the
// process before it commits.
func enqueueAndDie(s *sqlstore.Store, db *sql.DB) error {
	ctx := context.Background()
	from, _ := strconv.Atoi(os.Getenv(envChildFrom))
	subject := os.Getenv(envChildSubject)
	for _, commit := range []bool{true, false} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for i := range 10 {
			if _, err := s.Tx(tx).Enqueue(ctx, event(subject, from+i)); err != nil {
				return err
			}
		}
		if !commit {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		from += 10
	}
	return nil
}

// child runs this test binary as a child of mode over the given tables,
// with extra environment, and returns its command.
func child(b *backend, records, outbox, mode string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=1", envChildMode+"="+mode, envChildDriver+"="+b.driver, envChildDSN+"="+b.dsn,
		envChildRecords+"="+records, envChildOutbox+"="+outbox)
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// killedBySIGKILL fails t unless err is the exit of a process killed by
// SIGKILL.
func killedBySIGKILL(t *testing.T, what string, err error, out []byte) {
	t.Helper()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("%s: %v, want killed by SIGKILL; output:\n%s", what, err, out)
	}
}

// TestPublisherKilledMidTransactionPublishesNothingOfIt: processes that
// each commit 10 events and are SIGKILLed in the middle of a second
// transaction of 10 leave exactly their committed events, which the relay
// publishes once each; nothing of the killed transactions is published.
func TestPublisherKilledMidTransactionPublishesNothingOfIt(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			records, outbox := fmt.Sprintf("prec%d", tables.Add(1)), fmt.Sprintf("pob%d", tables.Add(1))
			s := openOutbox(t, b, records, outbox, true)
			js := connect(t)
			stream, subject := newStream(t, js)
			const kills = 5
			committed := map[string]bool{}
			for k := range kills {
				from := k * 20
				out, err := child(b, records, outbox, "enqueue", envChildSubject+"="+subject, envChildFrom+"="+strconv.Itoa(from)).CombinedOutput()
				killedBySIGKILL(t, "publisher", err, out)
				for i := from; i < from+10; i++ {
					m := event(subject, i)
					committed[sqlstore.MessageID(m.Scope, m.Key, m.Event)] = true
				}
			}
			if n := pending(t, s); n != kills*10 {
				t.Fatalf("%d rows in the outbox, want the %d committed", n, kills*10)
			}
			pub, _ := idemrelay.NewJetStream(js)
			r, err := idemrelay.New(s, pub, idemrelay.WithPollInterval(10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			runRelays(t, s, []*idemrelay.Relay{r})
			counts, stored := streamCounts(t, stream)
			if stored != kills*10 || len(counts) != kills*10 {
				t.Fatalf("stream holds %d messages of %d ids, want %d", stored, len(counts), kills*10)
			}
			for id := range counts {
				if !committed[id] {
					t.Fatalf("message %s published, but its transaction was killed", id)
				}
			}
			t.Logf("%s: %d publishers killed mid-transaction; %d committed events published once each, 0 of the %d killed",
				b.name, kills, stored, kills*10)
		})
	}
}

// TestRelayKilledAtRandomLosesNothing SIGKILLs relay processes at random
// moments, mid-batch or between batches, many times, while they drain an
// outbox; one relay in this process finishes. The stream holds each
// committed event exactly once.
func TestRelayKilledAtRandomLosesNothing(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			records, outbox := fmt.Sprintf("krec%d", tables.Add(1)), fmt.Sprintf("kob%d", tables.Add(1))
			s := openOutbox(t, b, records, outbox, true)
			js := connect(t)
			stream, subject := newStream(t, js)
			const events, kills = 600, 10
			ids := enqueue(t, b, s, subject, 0, events)
			for k := range kills {
				cmd := child(b, records, outbox, "run")
				var out bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				// Wait until it has published something (or the outbox is
				// empty), then a random moment more.
				before := pending(t, s)
				deadline := time.Now().Add(30 * time.Second)
				for p := before; p == before && p > 0 && time.Now().Before(deadline); p = pending(t, s) {
					time.Sleep(2 * time.Millisecond)
				}
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond) // a random point of a batch, not a wait for correctness
				cmd.Process.Kill()
				killedBySIGKILL(t, fmt.Sprint("relay ", k), cmd.Wait(), out.Bytes())
			}
			left := pending(t, s)
			pub, _ := idemrelay.NewJetStream(js)
			r, err := idemrelay.New(s, pub, idemrelay.WithPollInterval(10*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			sum := runRelays(t, s, []*idemrelay.Relay{r})
			counts, stored := streamCounts(t, stream)
			lost, twice := 0, 0
			for id := range ids {
				switch counts[id] {
				case 0:
					lost++
				case 1:
				default:
					twice++
				}
			}
			if stored != events || len(counts) != events || lost != 0 || twice != 0 {
				t.Fatalf("stream holds %d messages of %d ids; %d lost, %d stored more than once; want %d once each", stored, len(counts), lost, twice, events)
			}
			t.Logf("%s: %d events, %d relays SIGKILLed at random, %d rows left to the last relay (%d of them already published); 0 lost, 0 stored twice",
				b.name, events, kills, left, sum.Duplicates)
		})
	}
}
