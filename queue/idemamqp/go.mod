module github.com/idemkit/idemkit/queue/idemamqp

go 1.26.0

replace github.com/idemkit/idemkit => ../..

require github.com/rabbitmq/amqp091-go v1.16.0 // indirect
