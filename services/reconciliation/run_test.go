package main

import (
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
)

// TestOpenAPIDocument: the service serves the committed openapi.json, and
// started, so every route it registers is in it and vice versa.
func TestOpenAPIDocument(t *testing.T) {
	servicetest.StartWithoutBroker(t, run, map[string]string{"ADMIN_TOKEN": "tok"}).CheckOpenAPI("openapi.json")
}
