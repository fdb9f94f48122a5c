package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// Order is one order, as the API shows it.
type Order struct {
	ID   uint64 `json:"id"`
	SKU  string `json:"sku"`
	Qty  int    `json:"qty"`
	User string `json:"user"`
}

// errKeyReused reports an order created under a deduplication key that the
// same user already used for a different order (another SKU or quantity).
var errKeyReused = errors.New("this key was already used for a different order")

// orderRepo stores orders. It is the service's own database, separate from
// the idempotency store, and it carries the last line of defence against
// duplicates: a unique index on (user, deduplication key).
//
// Why a unique index when the idemkit engine already deduplicates? The
// engine records "this key is done" in a second write, after the handler
// created the order. A process killed between the two writes leaves an
// order whose idempotency record is still "in progress"; once its lease
// expires a client retry runs the handler again. Without the index that
// retry would create a second order. With it, the retry finds the order the
// first attempt created and answers with it: the database constraint, not
// the cache in front of it, is what finally guarantees one order per key.
//
// Implementations are safe for concurrent use.
type orderRepo interface {
	// Create stores a new order for o.User, assigns its ID and returns it
	// with created true. When dedupKey is not empty it is unique per user:
	// if o.User already has an order under dedupKey, Create stores nothing
	// and returns that order with created false, or errKeyReused when that
	// order differs from o in SKU or quantity. The check and the insert are
	// one atomic step.
	Create(ctx context.Context, o Order, dedupKey string) (order Order, created bool, err error)

	// List returns the user's orders, oldest first; an empty, non-nil
	// slice when there are none.
	List(ctx context.Context, user string) ([]Order, error)
}

// existingOrder decides what Create answers when (user, dedupKey) is already
// taken by existing: that order, unless the new one asks for something else.
func existingOrder(existing, requested Order) (Order, bool, error) {
	if existing.SKU != requested.SKU || existing.Qty != requested.Qty {
		return Order{}, false, errKeyReused
	}
	return existing, false, nil
}

// Bucket layout of boltOrders, in the same bbolt file as the idempotency
// records (which boltstore keeps in a bucket of its own):
//
//	orders/<user>/<id as 8-byte big-endian>  -> order as JSON
//	order_keys/<user>/<dedup key>            -> order id (8-byte big-endian)
//
// The root "orders" bucket's sequence numbers the orders. Big-endian IDs
// make a user's bucket iterate oldest first.
var (
	ordersBucket    = []byte("orders")
	orderKeysBucket = []byte("order_keys")
)

// boltOrders is an orderRepo in a bbolt file. Every Create is one bbolt
// read-write transaction, and bbolt runs one at a time, so the unique
// index lookup and the insert cannot interleave with another Create.
type boltOrders struct {
	db *bolt.DB
}

// newBoltOrders returns an orderRepo over db, creating its buckets if
// needed. The caller owns db and closes it.
func newBoltOrders(db *bolt.DB) (*boltOrders, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{ordersBucket, orderKeysBucket} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &boltOrders{db: db}, nil
}

// Create implements orderRepo.
func (r *boltOrders) Create(ctx context.Context, o Order, dedupKey string) (Order, bool, error) {
	if err := ctx.Err(); err != nil {
		return Order{}, false, err
	}
	var existing *Order
	err := r.db.Update(func(tx *bolt.Tx) error {
		if dedupKey != "" {
			found, err := lookupOrderKey(tx, o.User, dedupKey)
			if err != nil || found != nil {
				existing = found
				return err
			}
		}
		var err error
		o, err = insertOrder(tx, o)
		if err != nil || dedupKey == "" {
			return err
		}
		return indexOrderKey(tx, o, dedupKey)
	})
	switch {
	case err != nil:
		return Order{}, false, fmt.Errorf("orders: %w", err)
	case existing != nil:
		return existingOrder(*existing, o)
	}
	return o, true, nil
}

// List implements orderRepo.
func (r *boltOrders) List(ctx context.Context, user string) ([]Order, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	orders := []Order{}
	err := r.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(ordersBucket).Bucket([]byte(user))
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			o, err := decodeOrder(k, v)
			orders = append(orders, o)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("orders: %w", err)
	}
	return orders, nil
}

// lookupOrderKey returns the user's order stored under dedupKey, or nil.
func lookupOrderKey(tx *bolt.Tx, user, dedupKey string) (*Order, error) {
	keys := tx.Bucket(orderKeysBucket).Bucket([]byte(user))
	if keys == nil {
		return nil, nil
	}
	id := keys.Get([]byte(dedupKey))
	if id == nil {
		return nil, nil
	}
	v := tx.Bucket(ordersBucket).Bucket([]byte(user)).Get(id)
	if v == nil {
		return nil, fmt.Errorf("key %q points to missing order %x", dedupKey, id)
	}
	o, err := decodeOrder(id, v)
	return &o, err
}

// insertOrder numbers o from the orders bucket's sequence and stores it.
func insertOrder(tx *bolt.Tx, o Order) (Order, error) {
	root := tx.Bucket(ordersBucket)
	id, err := root.NextSequence()
	if err != nil {
		return Order{}, err
	}
	o.ID = id
	b, err := root.CreateBucketIfNotExists([]byte(o.User))
	if err != nil {
		return Order{}, err
	}
	v, err := json.Marshal(o)
	if err != nil {
		return Order{}, err
	}
	return o, b.Put(orderID(id), v)
}

// indexOrderKey records that o was created under dedupKey.
func indexOrderKey(tx *bolt.Tx, o Order, dedupKey string) error {
	keys, err := tx.Bucket(orderKeysBucket).CreateBucketIfNotExists([]byte(o.User))
	if err != nil {
		return err
	}
	return keys.Put([]byte(dedupKey), orderID(o.ID))
}

// orderID encodes an order ID as a bbolt key.
func orderID(id uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, id)
}

// decodeOrder decodes a stored order, checking it against its key.
func decodeOrder(k, v []byte) (Order, error) {
	var o Order
	if err := json.Unmarshal(v, &o); err != nil {
		return Order{}, fmt.Errorf("order %x: %w", k, err)
	}
	if len(k) != 8 || binary.BigEndian.Uint64(k) != o.ID {
		return Order{}, fmt.Errorf("order %x: stored under the wrong key", k)
	}
	return o, nil
}

// Bounds of the in-memory order list: without them one caller could fill
// the process's memory with orders (issue 11, item 11).
const (
	maxMemoryOrders        = 100_000
	maxMemoryOrdersPerUser = 1_000
)

// errOrdersFull reports an order refused because the in-memory order list
// is full, for everyone or for its user. Nothing was stored.
var errOrdersFull = errors.New("the in-memory order list is full")

// memoryOrders is an orderRepo in process memory: orders are lost when the
// process exits. It holds at most max orders, and at most perUser per
// user, so one user's flood cannot take the others' room; past that,
// Create fails with errOrdersFull rather than forget orders (forgetting
// one would also forget its unique index entry). One mutex makes the
// index lookup and the insert atomic.
type memoryOrders struct {
	mu           sync.Mutex
	max, perUser int
	count        int
	lastID       uint64
	byUser       map[string][]Order
	byKey        map[userKey]Order
}

// userKey is a (user, deduplication key) pair, the unique index's key.
type userKey struct {
	user, key string
}

// newMemoryOrders returns an empty in-memory orderRepo holding at most max
// orders, at most perUser of them per user.
func newMemoryOrders(max, perUser int) *memoryOrders {
	return &memoryOrders{max: max, perUser: perUser, byUser: map[string][]Order{}, byKey: map[userKey]Order{}}
}

// Create implements orderRepo.
func (r *memoryOrders) Create(ctx context.Context, o Order, dedupKey string) (Order, bool, error) {
	if err := ctx.Err(); err != nil {
		return Order{}, false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	uk := userKey{o.User, dedupKey}
	if existing, ok := r.byKey[uk]; ok && dedupKey != "" {
		return existingOrder(existing, o)
	}
	switch {
	case r.count >= r.max:
		return Order{}, false, fmt.Errorf("%w (%d orders)", errOrdersFull, r.max)
	case len(r.byUser[o.User]) >= r.perUser:
		return Order{}, false, fmt.Errorf("%w for this user (%d orders)", errOrdersFull, r.perUser)
	}
	r.count++
	r.lastID++
	o.ID = r.lastID
	r.byUser[o.User] = append(r.byUser[o.User], o)
	if dedupKey != "" {
		r.byKey[uk] = o
	}
	return o, true, nil
}

// List implements orderRepo.
func (r *memoryOrders) List(ctx context.Context, user string) ([]Order, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Order{}, r.byUser[user]...), nil
}
