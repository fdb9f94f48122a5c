module github.com/idemkit/idemkit/adapters/idemecho

go 1.26.0

replace github.com/idemkit/idemkit => ../..

require (
	github.com/idemkit/idemkit v0.0.0-00010101000000-000000000000
	github.com/labstack/echo/v5 v5.4.4
)
