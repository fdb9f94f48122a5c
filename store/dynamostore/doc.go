// Package dynamostore is a store.Store kept in one Amazon DynamoDB table,
// through the AWS SDK for Go v2 (github.com/aws/aws-sdk-go-v2/service/dynamodb).
// It is a module of its own, so that idemkit's core never pulls the SDK.
//
//	cfg, err := config.LoadDefaultConfig(ctx)
//	client := dynamodb.NewFromConfig(cfg)
//	s, err := dynamostore.New(ctx, client, "idemkit")
//
// or, with the package imported, store.Open(ctx,
// "dynamodb://idemkit?region=eu-west-1"); see the URL form below.
//
// # Table
//
// One table, its items one per key:
//
//	k    B  partition key: the store key's bytes (no sort key)
//	v    B  a format byte (0: the value as is, 1: deflated), then the value
//	x    N  expiry, Unix milliseconds: the one the conditions check
//	ttl  N  expiry, Unix seconds rounded up: for DynamoDB's TTL deletion
//	h    B  SHA-256 of the value, on items whose value is deflated
//
// CreateTable makes it (on-demand billing) and EnableTTL turns on
// DynamoDB's deletion of expired items on ttl, which only keeps the table
// small: DynamoDB deletes expired items up to days late, and every
// operation checks x itself, to the millisecond. New checks the key
// schema with one DescribeTable: a missing table, or one keyed otherwise,
// is an error wrapping ErrTable naming the table and the schema expected.
//
// The engine names its keys with digests of the caller's keys, so items
// hold no caller key in clear; errors name a key by the first 12 hex
// digits of its SHA-256, never by its bytes.
//
// # One request per operation
//
// Every operation is one DynamoDB request, atomic on one item:
//
//   - SetNX and SetNXValue: PutItem with the condition
//     attribute_not_exists(k) OR x <= now, and
//     ReturnValuesOnConditionCheckFailure ALL_OLD, so a failed claim gets
//     the item that holds the key in the same answer.
//   - Get: GetItem, strongly consistent; an item past x is absent.
//   - CompareAndSwap: PutItem with the condition x > now AND v = old.
//   - CompareAndDelete: DeleteItem with the same condition.
//   - Consume: DeleteItem with the condition x > now and ReturnValues
//     ALL_OLD.
//
// now is the writer's clock, in milliseconds: DynamoDB has no clock of
// its own in conditions, so the hosts sharing a table must keep their
// clocks synchronized (NTP, Amazon Time Sync); a host whose clock runs
// ahead sees items expire early by as much.
//
// # Item size
//
// DynamoDB refuses items over 400 KB. A value whose item would exceed it
// is stored deflated, together with its SHA-256, which CompareAndSwap and
// CompareAndDelete then compare instead of the value; a value still too
// large deflated is refused with an error wrapping ErrTooLarge, which
// wraps store.ErrInvalid: the engine then keeps a terminal record, so the
// work never runs again (see idemkit's WithOversized).
//
// # Capabilities
//
// The store implements store.SetNXValuer (the same one request as SetNX),
// store.Scanner and store.Pinger (one DescribeTable). Scan reads the
// whole table, because DynamoDB cannot list partition keys by prefix: it
// is for operator tools, and costs read capacity in proportion to the
// table, not to the keys listed. The store does not implement
// store.Batcher: BatchWriteItem takes no conditions, and
// TransactWriteItems, which does, cancels the whole batch when one key is
// held, so a batch of claims would cost more requests than the claims
// one by one.
//
// # Errors and retries
//
// Throttling (ProvisionedThroughputExceededException,
// RequestLimitExceeded, ThrottlingException), an answer with a 5xx
// status, a transport failure and an answer that cannot be read return
// errors wrapping store.ErrUnavailable, with the SDK's error in the
// chain; a done ctx returns one wrapping ctx.Err() (and
// store.ErrUnavailable for a deadline). Every request is sent without
// the SDK's retries, whatever the client's retryer, so that idemkit's
// failure policy decides what happens next, and because a conditional
// write retried after its answer was lost would report the write its
// first attempt made as someone else's.
//
// # Permissions
//
// The store needs dynamodb:PutItem, dynamodb:GetItem, dynamodb:DeleteItem
// and dynamodb:DescribeTable on the table, and dynamodb:Scan for Scan
// only; CreateTable and EnableTTL need dynamodb:CreateTable,
// dynamodb:DescribeTable and dynamodb:UpdateTimeToLive.
//
// # URL
//
//	dynamodb://TABLE[?region=REGION][&endpoint=URL]
//
// region overrides the region of the SDK's default configuration;
// endpoint names another server (DynamoDB Local, dynalite). Credentials
// come from the SDK's default chain and never from the URL: a URL with a
// user or password is refused, as is any parameter other than these two.
//
// # Tests
//
// The tests run against dynalite (npm), a DynamoDB-compatible server
// that ./install-dynalite.sh installs, patched to answer
// ReturnValuesOnConditionCheckFailure as DynamoDB does;
// scripts/test.sh runs it and sets DYNALITE_CLI.
package dynamostore
