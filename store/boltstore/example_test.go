package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/boltstore"
)

func Example() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := boltstore.Open(filepath.Join(dir, "idemkit.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	set, _, err := s.SetNX(ctx, "order-42", []byte("processing"), time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first claim:", set)

	set, existing, err := s.SetNX(ctx, "order-42", []byte("processing"), time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("second claim:", set, string(existing.Value))
	// Output:
	// first claim: true
	// second claim: false processing
}

func ExampleOpen_locked() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "idemkit.db")

	s, err := boltstore.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	_, err = boltstore.Open(path, boltstore.WithOpenTimeout(50*time.Millisecond))
	fmt.Println(errors.Is(err, boltstore.ErrLocked))
	// Output: true
}

func ExampleNew() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := bolt.Open(filepath.Join(dir, "app.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close() // the caller owns db: Store.Close leaves it open

	s, err := boltstore.New(db, "idempotency", boltstore.WithSweepInterval(10*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	if _, _, err := s.SetNX(ctx, "token", []byte("t1"), time.Hour); err != nil {
		log.Fatal(err)
	}
	v, err := s.Consume(ctx, "token")
	fmt.Println(string(v), err)
	_, err = s.Consume(ctx, "token")
	fmt.Println(errors.Is(err, store.ErrNotFound))
	// Output:
	// t1 <nil>
	// true
}

func ExampleOpen_invalidOption() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	_, err = boltstore.Open(filepath.Join(dir, "idemkit.db"), boltstore.WithSweepBatch(0))
	fmt.Println(errors.Is(err, store.ErrInvalid))
	fmt.Println(err)
	// Output:
	// true
	// boltstore: store: invalid argument: WithSweepBatch(0): the batch must be in [1, 1048576]
}

func ExampleStore_SetNXBatch() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := boltstore.Open(filepath.Join(dir, "idemkit.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	ctx := context.Background()
	if _, _, err := s.SetNX(ctx, "msg-2", []byte("consumer-a"), time.Minute); err != nil {
		log.Fatal(err)
	}
	// Claim a fetched batch of messages in one transaction and one flush.
	res, err := s.SetNXBatch(ctx, []store.BatchItem{
		{Key: "msg-1", Value: []byte("consumer-b"), TTL: time.Minute},
		{Key: "msg-2", Value: []byte("consumer-b"), TTL: time.Minute},
		{Key: "msg-1", Value: []byte("consumer-b"), TTL: time.Minute}, // redelivered within the batch
	})
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range res {
		if r.Set {
			fmt.Println(i, "claimed")
		} else {
			fmt.Println(i, "held by", string(r.Existing.Value))
		}
	}
	// Output:
	// 0 claimed
	// 1 held by consumer-a
	// 2 held by consumer-b
}
