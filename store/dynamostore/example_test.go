package dynamostore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/store/dynamostore"
)

// ExampleNew opens a store over a table made by CreateTable. It needs
// AWS credentials and a region from the SDK's default chain, so it is
// compiled, not run; the tests run the same calls against dynalite.
func ExampleNew() {
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	client := dynamodb.NewFromConfig(cfg)
	if err := dynamostore.CreateTable(ctx, client, "idemkit"); err != nil {
		log.Fatal(err)
	}
	s, err := dynamostore.New(ctx, client, "idemkit")
	if err != nil {
		log.Fatal(err) // a missing table or another key schema: ErrTable
	}
	set, _, err := s.SetNX(ctx, "order-42", []byte("claim-A"), time.Minute)
	fmt.Println(set, err)
	set, held, err := s.SetNX(ctx, "order-42", []byte("claim-B"), time.Minute)
	fmt.Println(set, string(held.Value), err) // the holder, from the same request
}
