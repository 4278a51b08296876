package adapters

import (
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/service"
)

// CallbackPath is where the order service receives the inventory
// service's callbacks, relative to ORDER_URL.
const CallbackPath = "/inventory/callback"

// OrderService is how the inventory service reaches the order service:
// the signed callbacks the outbox relay delivers (a paid order whose stock
// could not be deducted).
type OrderService struct {
	Callbacks *outbox.HTTPSink
}

// NewOrderService returns the order service cfg names, whose callbacks
// are signed with cfg's callback secret.
func NewOrderService(cfg service.CallbackSenderConfig) OrderService {
	return OrderService{Callbacks: cfg.Sink(cfg.Client(outbox.DefaultHTTPSinkParallel), CallbackPath)}
}
