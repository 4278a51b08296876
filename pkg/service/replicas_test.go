package service_test

import (
	"context"
	"io"
	"sync"
	"testing"

	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/service"
	"github.com/reliable-orders/fulfillment/pkg/testkit/servicetest"
)

// TestReplicasStartTogether opens four instances of one service at once
// on a database that does not exist yet, as kubectl scale does: each one
// creates or finds the database, migrates it or waits for the one that
// does, and starts.
func TestReplicasStartTogether(t *testing.T) {
	cfg := testConfig(t)
	opts := service.Options{Migrations: []postgres.MigrationSet{outbox.Schema()}}
	const replicas = 4
	start := make(chan struct{})
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		c := cfg
		c.HTTPAddr = servicetest.FreeAddr(t)
		wg.Go(func() {
			<-start
			svc, err := service.New(context.Background(), c, io.Discard, opts)
			if err == nil {
				err = svc.Close()
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
		}
	}
}
