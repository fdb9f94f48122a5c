package dynamostore

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/store"
)

// The attributes of an item; see the package documentation, "Table".
const (
	// KeyAttribute is the table's partition key, of type B (binary): the
	// store key's bytes. The table has no sort key.
	KeyAttribute = "k"
	// TTLAttribute holds an item's expiry in Unix seconds (rounded up),
	// for DynamoDB's TTL deletion; see EnableTTL.
	TTLAttribute = "ttl"

	attrValue  = "v" // B: a format byte, then the value or its deflate
	attrExpiry = "x" // N: the expiry in Unix milliseconds
	attrHash   = "h" // B: SHA-256 of a compressed item's value
)

// Formats of the value attribute, its first byte.
const (
	formatRaw     = 0
	formatDeflate = 1
)

// MaxItemSize is DynamoDB's limit on the size of an item, attribute names
// and values together.
const MaxItemSize = 400 << 10

// numberSize bounds the size DynamoDB counts for a number attribute.
const numberSize = 21

// itemSize returns the size, as DynamoDB counts it (an upper bound for
// the numbers), of an item for key whose value attribute holds n bytes
// (format byte included), with a hash attribute when hashed.
func itemSize(key string, n int, hashed bool) int {
	size := len(KeyAttribute) + len(key) + len(attrValue) + n +
		len(attrExpiry) + numberSize + len(TTLAttribute) + numberSize
	if hashed {
		size += len(attrHash) + sha256.Size
	}
	return size
}

// inline reports whether a value of n bytes under key is stored as it
// is; a larger one is stored deflated, with its hash.
func inline(key string, n int) bool {
	return itemSize(key, 1+n, false) <= MaxItemSize
}

// item returns the item holding value under key until exp (Unix ms). A
// value too large to fit even deflated returns an error wrapping
// ErrTooLarge.
func item(key string, value []byte, exp int64) (map[string]types.AttributeValue, error) {
	it := map[string]types.AttributeValue{
		KeyAttribute: &types.AttributeValueMemberB{Value: []byte(key)},
		attrExpiry:   &types.AttributeValueMemberN{Value: strconv.FormatInt(exp, 10)},
		TTLAttribute: &types.AttributeValueMemberN{Value: strconv.FormatInt((exp+999)/1000, 10)},
	}
	if inline(key, len(value)) {
		v := make([]byte, 1+len(value))
		copy(v[1:], value) // v[0] = formatRaw
		it[attrValue] = &types.AttributeValueMemberB{Value: v}
		return it, nil
	}
	z := deflate(value)
	if itemSize(key, len(z), true) > MaxItemSize {
		return nil, fmt.Errorf("%w: a value of %d bytes is %d bytes deflated, over DynamoDB's %d-byte item limit", ErrTooLarge, len(value), len(z)-1, MaxItemSize)
	}
	sum := sha256.Sum256(value)
	it[attrValue] = &types.AttributeValueMemberB{Value: z}
	it[attrHash] = &types.AttributeValueMemberB{Value: sum[:]}
	return it, nil
}

// match returns the condition that an item for key holds value, and its
// operand: the value attribute, or the hash for a value stored deflated.
func match(key string, value []byte) (string, types.AttributeValue) {
	if inline(key, len(value)) {
		v := make([]byte, 1+len(value))
		copy(v[1:], value)
		return "#v = :old", &types.AttributeValueMemberB{Value: v}
	}
	sum := sha256.Sum256(value)
	return "#h = :old", &types.AttributeValueMemberB{Value: sum[:]}
}

// deflate returns formatDeflate followed by value compressed.
func deflate(value []byte) []byte {
	var buf bytes.Buffer
	buf.WriteByte(formatDeflate)
	w, _ := flate.NewWriter(&buf, flate.BestSpeed) // the level is valid
	_, _ = w.Write(value)                          // a bytes.Buffer does not fail
	_ = w.Close()
	return buf.Bytes()
}

// decoded is a live item read back.
type decoded struct {
	value []byte
	exp   int64 // Unix ms
}

// decode reads an item of key. A missing or malformed attribute returns
// an error wrapping store.ErrCorrupt that names the key by its digest.
func decode(key string, it map[string]types.AttributeValue) (decoded, error) {
	corrupt := func(what string) error {
		return fmt.Errorf("dynamostore: %w: %s: %s", store.ErrCorrupt, keyRef(key), what)
	}
	xa, ok := it[attrExpiry].(*types.AttributeValueMemberN)
	if !ok {
		return decoded{}, corrupt("no number attribute " + attrExpiry)
	}
	exp, err := strconv.ParseInt(xa.Value, 10, 64)
	if err != nil {
		return decoded{}, corrupt("attribute " + attrExpiry + " is not an integer")
	}
	va, ok := it[attrValue].(*types.AttributeValueMemberB)
	if !ok || len(va.Value) == 0 {
		return decoded{}, corrupt("no binary attribute " + attrValue)
	}
	switch va.Value[0] {
	case formatRaw:
		return decoded{value: bytes.Clone(va.Value[1:]), exp: exp}, nil
	case formatDeflate:
		r := flate.NewReader(bytes.NewReader(va.Value[1:]))
		value, err := io.ReadAll(io.LimitReader(r, store.MaxValueLen+1))
		if err != nil || len(value) > store.MaxValueLen {
			return decoded{}, corrupt("a deflated value that does not inflate")
		}
		return decoded{value: value, exp: exp}, nil
	}
	return decoded{}, corrupt(fmt.Sprintf("unknown value format %d", va.Value[0]))
}

// ttl returns the time left until exp (Unix ms) from now (Unix ms), at
// least a millisecond: the item was live when it was read.
func ttl(exp, now int64) time.Duration {
	return time.Duration(max(exp-now, 1)) * time.Millisecond
}

// expiry returns the expiry, in Unix ms, of a TTL set at now (Unix ms).
func expiry(now int64, d time.Duration) int64 {
	return now + int64(store.RoundTTL(d)/time.Millisecond)
}

// keyRef names a key in an error by the first 12 hex digits of its
// SHA-256: keys may hold secrets.
func keyRef(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "key " + hex.EncodeToString(sum[:6])
}
