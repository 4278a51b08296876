package devrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/reliable-orders/fulfillment/scripts/internal/supervise"
	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// Endpoint is a readiness URL to poll.
type Endpoint struct {
	// Name says whose it is in messages.
	Name string
	// URL answers 200 once the service is ready.
	URL string
}

// ReadyEndpoints are the /readyz URLs of services on this machine.
func ReadyEndpoints(services []suite.Service) []Endpoint {
	eps := make([]Endpoint, len(services))
	for i, s := range services {
		eps[i] = Endpoint{Name: s.Name, URL: s.LocalURL() + "/readyz"}
	}
	return eps
}

// pollInterval is the pause between two rounds of readiness checks.
const pollInterval = 200 * time.Millisecond

// WaitReady polls every endpoint until each has answered 200 once. It fails
// when timeout passes first (naming the services still not ready and what
// they last answered), when a supervised process exits meanwhile, or when
// ctx ends.
func WaitReady(ctx context.Context, client *http.Client, endpoints []Endpoint, timeout time.Duration, exits <-chan supervise.Exit, progress io.Writer) error {
	start := time.Now()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()

	last := map[string]string{}
	pending := endpoints
	for {
		var still []Endpoint
		for _, ep := range pending {
			if err := probe(ctx, client, ep.URL); err != nil {
				last[ep.Name] = err.Error()
				still = append(still, ep)
				continue
			}
			fmt.Fprintf(progress, "%s is ready (%s)\n", ep.Name, time.Since(start).Round(100*time.Millisecond))
		}
		if pending = still; len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e := <-exits:
			return exitError(e, "before it was ready")
		case <-deadline.C:
			errs := make([]error, len(pending))
			for i, ep := range pending {
				errs[i] = fmt.Errorf("%s not ready after %s: GET %s: %s", ep.Name, timeout, ep.URL, last[ep.Name])
			}
			return errors.Join(errs...)
		case <-tick.C:
		}
	}
}

// poll calls step every interval until it is done or fails, or ctx ends;
// late tells step that timeout has passed, so it fails rather than wait on.
func poll(ctx context.Context, timeout, interval time.Duration, step func(late bool) (done bool, err error)) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		if done, err := step(time.Now().After(deadline)); done || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// awaitReady polls url every interval until it answers 200, failing with
// a NotReadyError once gone says how the process exited or timeout passes.
func awaitReady(ctx context.Context, client *http.Client, timeout, interval time.Duration, name, url string, gone func() (exit string, err error)) error {
	return poll(ctx, timeout, interval, func(late bool) (bool, error) {
		err := probe(ctx, client, url)
		if err == nil {
			return true, nil
		}
		if exit, gerr := gone(); gerr != nil || exit != "" {
			return false, errors.Join(gerr, notReady(name, exit))
		}
		if late {
			return false, notReady(name, fmt.Sprintf("not ready after %s: %v", timeout, err))
		}
		return false, nil
	})
}

func probe(ctx context.Context, client *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return errors.New("not listening yet")
		}
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}

// exitError turns an unasked-for exit into the runner's error.
func exitError(e supervise.Exit, when string) error {
	if e.Err == nil {
		return fmt.Errorf("%s exited with status 0 %s", e.Name, when)
	}
	return fmt.Errorf("%s exited %s: %w", e.Name, when, e.Err)
}
