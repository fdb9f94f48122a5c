package idemfiber

import "github.com/idemkit/idemkit/keying"

// errBadKey is wrapped by every key parsing error (keying.ParseKeyHeader
// reads the header). Its texts never quote the key, so they can go back
// to the client.
var errBadKey = keying.ErrMalformedKey
