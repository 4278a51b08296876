module github.com/reliable-orders/fulfillment/scripts

go 1.26.0

require (
	github.com/lib/pq v1.12.3
	github.com/reliable-orders/fulfillment/pkg v0.0.0
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c // indirect
)

replace github.com/reliable-orders/fulfillment/pkg => ../pkg
