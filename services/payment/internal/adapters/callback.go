package adapters

// CallbackPath is where the order service receives callbacks, relative to ORDER_URL.
const CallbackPath = "/payments/callback"
