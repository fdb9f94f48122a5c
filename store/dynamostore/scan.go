package dynamostore

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/store"
)

// Scan calls fn with each live key starting with prefix and its entry
// (store.Scanner), for operator tools. DynamoDB cannot list keys by
// prefix without reading them all: Scan reads the whole table, page by
// page (one strongly consistent Scan request per 1 MB page), and
// DynamoDB filters the pages, so its cost in read capacity follows the
// table's size, not the number of keys listed. The engine never calls
// it.
func (s *Store) Scan(ctx context.Context, prefix string, fn func(key string, ent store.Entry) bool) error {
	filter := condLive
	names := map[string]string{"#x": attrExpiry}
	values := map[string]types.AttributeValue{}
	if prefix != "" {
		filter += " AND begins_with(#k, :p)"
		names["#k"] = KeyAttribute
		values[":p"] = &types.AttributeValueMemberB{Value: []byte(prefix)}
	}
	var start map[string]types.AttributeValue
	for {
		now := nowMs()
		values[":now"] = number(now)
		out, err := s.api.Scan(ctx, &dynamodb.ScanInput{
			TableName:                 s.table,
			ConsistentRead:            aws.Bool(true),
			FilterExpression:          aws.String(filter),
			ExpressionAttributeNames:  names,
			ExpressionAttributeValues: values,
			ExclusiveStartKey:         start,
		}, noRetry)
		if err != nil {
			return fail(ctx, "Scan", "", err)
		}
		for _, it := range out.Items {
			kb, ok := it[KeyAttribute].(*types.AttributeValueMemberB)
			if !ok {
				continue // not an item of this store
			}
			key := string(kb.Value)
			if !strings.HasPrefix(key, prefix) {
				continue
			}
			d, err := decode(key, it)
			if err != nil {
				return err
			}
			if !fn(key, store.Entry{Value: d.value, TTL: ttl(d.exp, now)}) {
				return nil
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return nil
		}
		start = out.LastEvaluatedKey
	}
}
