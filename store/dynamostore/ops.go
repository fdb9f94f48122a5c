package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/store"
)

// Condition expressions. Expiry is checked by the condition itself, in
// milliseconds against the writer's clock: DynamoDB's TTL deletion lags.
const (
	condClaim = "attribute_not_exists(#k) OR #x <= :now"
	condLive  = "#x > :now"
)

// names maps the placeholders of the conditions to attribute names.
var (
	namesClaim = map[string]string{"#k": KeyAttribute, "#x": attrExpiry}
	namesLive  = map[string]string{"#x": attrExpiry}
	namesMatch = map[string]string{"#x": attrExpiry, "#v": attrValue, "#h": attrHash}
)

// nowMs returns the current time in Unix milliseconds.
func nowMs() int64 { return time.Now().UnixMilli() }

// number returns a number attribute value.
func number(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// keyOf returns the key attributes of an item for key.
func (s *Store) keyOf(key string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{KeyAttribute: &types.AttributeValueMemberB{Value: []byte(key)}}
}

// SetNX stores value under key with the given TTL if key is absent or
// its item has expired, with one conditional PutItem. When the key is
// held, DynamoDB returns the item the condition failed on in the same
// answer (ReturnValuesOnConditionCheckFailure ALL_OLD), so SetNX reports
// it without another request.
func (s *Store) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, store.Entry, error) {
	set, held, err := s.claim(ctx, "SetNX", key, value, ttl)
	if err != nil || set {
		return set, store.Entry{}, err
	}
	return false, store.Entry{Value: held.value, TTL: ttlLeft(held.exp)}, nil
}

// SetNXValue is SetNX without the existing entry's TTL
// (store.SetNXValuer); it costs the same one request.
func (s *Store) SetNXValue(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, []byte, error) {
	set, held, err := s.claim(ctx, "SetNXValue", key, value, ttl)
	if err != nil || set {
		return set, nil, err
	}
	return false, held.value, nil
}

// claim runs the conditional PutItem of SetNX and SetNXValue.
func (s *Store) claim(ctx context.Context, op, key string, value []byte, ttl time.Duration) (bool, decoded, error) {
	if err := store.CheckSet(key, value, ttl); err != nil {
		return false, decoded{}, fmt.Errorf("dynamostore: %s: %w", op, err)
	}
	now := nowMs()
	it, err := item(key, value, expiry(now, ttl))
	if err != nil {
		return false, decoded{}, fmt.Errorf("dynamostore: %s %s: %w", op, keyRef(key), err)
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           s.table,
		Item:                                it,
		ConditionExpression:                 aws.String(condClaim),
		ExpressionAttributeNames:            namesClaim,
		ExpressionAttributeValues:           map[string]types.AttributeValue{":now": number(now)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, noRetry)
	if err == nil {
		return true, decoded{}, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return false, decoded{}, fail(ctx, op, key, err)
	}
	if ccf.Item == nil {
		return false, decoded{}, fmt.Errorf("dynamostore: %s %s: the failed condition returned no item: the server does not support ReturnValuesOnConditionCheckFailure", op, keyRef(key))
	}
	held, err := decode(key, ccf.Item)
	return false, held, err
}

// ttlLeft returns the time left until exp (Unix ms), at least a
// millisecond.
func ttlLeft(exp int64) time.Duration { return ttl(exp, nowMs()) }

// Get returns the live value under key and its remaining TTL, with one
// strongly consistent GetItem.
func (s *Store) Get(ctx context.Context, key string) (store.Entry, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Entry{}, fmt.Errorf("dynamostore: Get: %w", err)
	}
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      s.table,
		Key:            s.keyOf(key),
		ConsistentRead: aws.Bool(true),
	}, noRetry)
	if err != nil {
		return store.Entry{}, fail(ctx, "Get", key, err)
	}
	if out.Item == nil {
		return store.Entry{}, fmt.Errorf("dynamostore: Get: %w", store.ErrNotFound)
	}
	d, err := decode(key, out.Item)
	if err != nil {
		return store.Entry{}, err
	}
	now := nowMs()
	if d.exp <= now {
		return store.Entry{}, fmt.Errorf("dynamostore: Get: %w", store.ErrNotFound)
	}
	return store.Entry{Value: d.value, TTL: ttl(d.exp, now)}, nil
}

// CompareAndSwap replaces the value under key with new and its TTL with
// ttl if the live value equals old, with one conditional PutItem.
func (s *Store) CompareAndSwap(ctx context.Context, key string, old, new []byte, ttl time.Duration) (bool, error) {
	if err := store.CheckSwap(key, old, new, ttl); err != nil {
		return false, fmt.Errorf("dynamostore: CompareAndSwap: %w", err)
	}
	now := nowMs()
	it, err := item(key, new, expiry(now, ttl))
	if err != nil {
		return false, fmt.Errorf("dynamostore: CompareAndSwap %s: %w", keyRef(key), err)
	}
	cond, operand := match(key, old)
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 s.table,
		Item:                      it,
		ConditionExpression:       aws.String(condLive + " AND " + cond),
		ExpressionAttributeNames:  matchNames(cond),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": number(now), ":old": operand},
	}, noRetry)
	return conditional(ctx, "CompareAndSwap", key, err)
}

// CompareAndDelete deletes key if its live value equals old, with one
// conditional DeleteItem.
func (s *Store) CompareAndDelete(ctx context.Context, key string, old []byte) (bool, error) {
	if err := store.CheckDelete(key, old); err != nil {
		return false, fmt.Errorf("dynamostore: CompareAndDelete: %w", err)
	}
	cond, operand := match(key, old)
	_, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 s.table,
		Key:                       s.keyOf(key),
		ConditionExpression:       aws.String(condLive + " AND " + cond),
		ExpressionAttributeNames:  matchNames(cond),
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": number(nowMs()), ":old": operand},
	}, noRetry)
	return conditional(ctx, "CompareAndDelete", key, err)
}

// matchNames returns the placeholders a match condition uses: DynamoDB
// refuses unused ones.
func matchNames(cond string) map[string]string {
	if cond[1] == 'v' {
		return map[string]string{"#x": namesMatch["#x"], "#v": namesMatch["#v"]}
	}
	return map[string]string{"#x": namesMatch["#x"], "#h": namesMatch["#h"]}
}

// conditional turns the outcome of a conditional write into the report
// of CompareAndSwap and CompareAndDelete.
func conditional(ctx context.Context, op, key string, err error) (bool, error) {
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &ccf):
		return false, nil
	}
	return false, fail(ctx, op, key, err)
}

// Consume deletes the live item under key and returns its value, with
// one DeleteItem conditioned on the item being live and returning it
// (ReturnValues ALL_OLD).
func (s *Store) Consume(ctx context.Context, key string) ([]byte, error) {
	if err := store.CheckKey(key); err != nil {
		return nil, fmt.Errorf("dynamostore: Consume: %w", err)
	}
	out, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 s.table,
		Key:                       s.keyOf(key),
		ConditionExpression:       aws.String(condLive),
		ExpressionAttributeNames:  namesLive,
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": number(nowMs())},
		ReturnValues:              types.ReturnValueAllOld,
	}, noRetry)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return nil, fmt.Errorf("dynamostore: Consume: %w", store.ErrNotFound)
	case err != nil:
		return nil, fail(ctx, "Consume", key, err)
	}
	d, err := decode(key, out.Attributes)
	if err != nil {
		return nil, err
	}
	return d.value, nil
}
