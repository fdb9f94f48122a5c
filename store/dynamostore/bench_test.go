package dynamostore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/store/dynamostore"
)

// The benchmarks set each store operation the engine uses per request
// (claim: SetNX; replay: Get; completion: CompareAndSwap) beside the raw
// DynamoDB request a hand-written version would send, against the same
// dynalite, alternating the two in one loop so that the server's warm-up
// and the machine's load weigh on both alike:
//
//	go test -run '^$' -bench . ./store/dynamostore/
//
// Each reports store-ns/op and raw-ns/op, their ratio x-raw, and req/op,
// the HTTP requests the store sent per operation.

var benchValue = []byte(`{"status":200,"body":"order 42 paid"}`)

// bench returns a store over a fresh table, a raw client of the same
// table, and the counter of the requests of the one the benchmark uses.
func bench(b *testing.B) (s *dynamostore.Store, sc *counter, raw *dynamodb.Client, rc *counter, table *string) {
	s, sc = newStore(b)
	raw, rc = newClient(endpoint)
	return s, sc, raw, rc, aws.String(s.Table())
}

// paired runs storeOp and rawOp once each per iteration, in alternating
// order, and reports their times, the ratio, and the requests per store
// operation sc counted.
func paired(b *testing.B, sc *counter, storeOp, rawOp func(i int)) {
	b.Helper()
	sc.reset()
	var st, rt time.Duration
	n := 0
	for i := 0; b.Loop(); i++ {
		t0 := time.Now()
		if i%2 == 0 {
			storeOp(i)
			t1 := time.Now()
			rawOp(i)
			st, rt = st+t1.Sub(t0), rt+time.Since(t1)
		} else {
			rawOp(i)
			t1 := time.Now()
			storeOp(i)
			rt, st = rt+t1.Sub(t0), st+time.Since(t1)
		}
		n++
	}
	b.ReportMetric(float64(st.Nanoseconds())/float64(n), "store-ns/op")
	b.ReportMetric(float64(rt.Nanoseconds())/float64(n), "raw-ns/op")
	b.ReportMetric(float64(st)/float64(rt), "x-raw")
	b.ReportMetric(float64(sc.total())/float64(n), "req/op")
}

// rawItem is the item a hand-written claim would put.
func rawItem(key string, value []byte) map[string]types.AttributeValue {
	exp := time.Now().Add(time.Minute).UnixMilli()
	return map[string]types.AttributeValue{
		"k":   &types.AttributeValueMemberB{Value: []byte(key)},
		"v":   &types.AttributeValueMemberB{Value: value},
		"x":   &types.AttributeValueMemberN{Value: strconv.FormatInt(exp, 10)},
		"ttl": &types.AttributeValueMemberN{Value: strconv.FormatInt(exp/1000+1, 10)},
	}
}

// now returns the current time as a number attribute.
func now() types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().UnixMilli(), 10)}
}

func BenchmarkClaim(b *testing.B) {
	s, sc, raw, _, table := bench(b)
	ctx := context.Background()
	paired(b, sc, func(i int) {
		if set, _, err := s.SetNX(ctx, "claim-"+strconv.Itoa(i), benchValue, time.Minute); err != nil || !set {
			b.Fatal(set, err)
		}
	}, func(i int) {
		_, err := raw.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                 table,
			Item:                      rawItem("raw-"+strconv.Itoa(i), benchValue),
			ConditionExpression:       aws.String("attribute_not_exists(k) OR x <= :now"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":now": now()},
		})
		if err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkClaimHeld is a claim of a held key, whose item comes back
// with the failed condition, beside the raw PutItem asking for it.
func BenchmarkClaimHeld(b *testing.B) {
	s, sc, raw, _, table := bench(b)
	ctx := context.Background()
	for _, k := range []string{"held", "raw-held"} {
		if _, _, err := s.SetNX(ctx, k, benchValue, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	paired(b, sc, func(int) {
		if set, held, err := s.SetNX(ctx, "held", []byte("other"), time.Minute); err != nil || set || held.Value == nil {
			b.Fatal(set, err)
		}
	}, func(int) {
		_, err := raw.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                           table,
			Item:                                rawItem("raw-held", []byte("other")),
			ConditionExpression:                 aws.String("attribute_not_exists(k) OR x <= :now"),
			ExpressionAttributeValues:           map[string]types.AttributeValue{":now": now()},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) || ccf.Item == nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkReplay(b *testing.B) {
	s, sc, raw, _, table := bench(b)
	ctx := context.Background()
	if _, _, err := s.SetNX(ctx, "done", benchValue, time.Hour); err != nil {
		b.Fatal(err)
	}
	key := map[string]types.AttributeValue{"k": &types.AttributeValueMemberB{Value: []byte("done")}}
	paired(b, sc, func(int) {
		if _, err := s.Get(ctx, "done"); err != nil {
			b.Fatal(err)
		}
	}, func(int) {
		out, err := raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil || out.Item == nil {
			b.Fatal(err)
		}
	})
}

// The completions swap a key between two values, as a completion swaps
// the in-progress record for the result.
var swapValues = [2][]byte{[]byte(`{"state":"running","owner":"a1b2c3"}`), benchValue}

func BenchmarkComplete(b *testing.B) {
	s, sc, raw, _, table := bench(b)
	ctx := context.Background()
	if _, _, err := s.SetNX(ctx, "k", swapValues[0], time.Hour); err != nil {
		b.Fatal(err)
	}
	if _, err := raw.PutItem(ctx, &dynamodb.PutItemInput{TableName: table, Item: rawItem("raw", swapValues[0])}); err != nil {
		b.Fatal(err)
	}
	var si, ri int
	paired(b, sc, func(int) {
		if ok, err := s.CompareAndSwap(ctx, "k", swapValues[si%2], swapValues[(si+1)%2], time.Hour); err != nil || !ok {
			b.Fatal(ok, err)
		}
		si++
	}, func(int) {
		_, err := raw.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:           table,
			Item:                rawItem("raw", swapValues[(ri+1)%2]),
			ConditionExpression: aws.String("x > :now AND v = :old"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":now": now(),
				":old": &types.AttributeValueMemberB{Value: swapValues[ri%2]},
			},
		})
		if err != nil {
			b.Fatal(err)
		}
		ri++
	})
}
