package devrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
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
	pending := slices.Clone(endpoints)
	return poll(ctx, timeout, pollInterval, func(late bool) (bool, error) {
		select {
		case e := <-exits:
			return false, exitError(e, "before it was ready")
		default:
		}
		var errs []error
		pending = slices.DeleteFunc(pending, func(ep Endpoint) bool {
			err := probe(ctx, client, ep.URL)
			if err != nil && late {
				errs = append(errs, fmt.Errorf("%s not ready after %s: GET %s: %w", ep.Name, timeout, ep.URL, err))
			} else if err == nil {
				fmt.Fprintf(progress, "%s is ready (%s)\n", ep.Name, time.Since(start).Round(100*time.Millisecond))
			}
			return err == nil
		})
		return len(pending) == 0, errors.Join(errs...)
	})
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
