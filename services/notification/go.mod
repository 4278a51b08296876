module github.com/reliable-orders/fulfillment/services/notification

go 1.26.0

require github.com/reliable-orders/fulfillment/pkg v0.0.0

replace github.com/reliable-orders/fulfillment/pkg => ../../pkg
