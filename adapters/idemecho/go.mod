module github.com/idemkit/idemkit/adapters/idemecho

go 1.26.0

replace github.com/idemkit/idemkit => ../..

require (
	github.com/idemkit/idemkit v0.0.0-00010101000000-000000000000
	github.com/labstack/echo/v5 v5.4.4
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/time v0.15.0 // indirect
)
