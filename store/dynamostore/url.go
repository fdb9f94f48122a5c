package dynamostore

import (
	"context"
	"fmt"
	"net/url"
	"regexp"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/idemkit/idemkit/store"
)

// The scheme this package registers with store.Open:
//
//	dynamodb://TABLE[?region=REGION][&endpoint=URL]
//
// region overrides the region of the SDK's default configuration
// (AWS_REGION, the shared config file); endpoint sends the requests to
// another server than DynamoDB's regional one, such as DynamoDB Local or
// dynalite (http://127.0.0.1:8000). Credentials come from the SDK's
// default chain (environment, shared files, SSO, the instance or task
// role); a URL holding a user or password is refused, as are a port, a
// path, an unknown parameter and one given twice. Opening checks the
// table as New does.
func init() {
	store.Register("dynamodb", func(ctx context.Context, u *url.URL) (store.Store, error) {
		return openURL(ctx, u)
	})
}

// tableName matches a valid DynamoDB table name.
var tableName = regexp.MustCompile(`^[A-Za-z0-9_.-]{3,255}$`)

// openURL opens the store a dynamodb:// URL names.
func openURL(ctx context.Context, u *url.URL) (*Store, error) {
	where := "dynamodb: open " + store.Redact(u.String())
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", where, store.ErrInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case u.Opaque != "":
		return nil, invalid("write dynamodb://TABLE")
	case u.User != nil:
		return nil, invalid("credentials do not belong in the URL: the AWS SDK's default chain provides them (environment, shared files, role)")
	case u.Port() != "":
		return nil, invalid("a table name takes no port; give the server with ?endpoint=")
	case u.Path != "" && u.Path != "/":
		return nil, invalid("the URL has a path; write dynamodb://TABLE")
	case !tableName.MatchString(u.Host):
		return nil, invalid("table name %q: 3 to 255 letters, digits, '_', '-' or '.'", u.Host)
	}
	p := store.NewParams(u)
	region, hasRegion, err := p.String("region")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	endpoint, hasEndpoint, err := p.String("endpoint")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := p.Done(); err != nil {
		return nil, fmt.Errorf("%s: %w (known: region, endpoint)", where, err)
	}
	if hasRegion && region == "" {
		return nil, invalid("empty region")
	}
	if hasEndpoint {
		e, err := url.Parse(endpoint)
		if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil {
			return nil, invalid("endpoint must be an http:// or https:// URL with a host and no credentials")
		}
	}
	var loads []func(*config.LoadOptions) error
	if hasRegion {
		loads = append(loads, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: AWS configuration: %w", where, store.ErrInvalid, err)
	}
	if cfg.Region == "" {
		return nil, invalid("no region: add ?region= or set AWS_REGION")
	}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if hasEndpoint {
			o.BaseEndpoint = &endpoint
		}
	})
	s, err := New(ctx, client, u.Host)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return s, nil
}
