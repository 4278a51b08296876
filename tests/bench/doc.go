// Package bench holds the suite's macro benchmarks, the figures `make bench`
// prints for issue 4 (docs/benchmarks.md):
//
//   - BenchmarkRelay: events per second from committed outbox rows to broker
//     acknowledgement, for pkg/outbox's relay and for Watermill's SQL
//     forwarder, on the same Postgres, broker and rows, in one run, with
//     their ratio.
//   - BenchmarkAPIPayToConverged: a steady rate of orders through the HTTP
//     API of a running suite, or a sweep of rates, and the latency of the
//     accepted orders from sending the payment until inventory, points and
//     notification have all applied the OrderPaid, the orders shed at
//     admission and the paid orders that never converged.
//
// They live in the tests module, not in pkg/, because the comparison needs
// watermill-sql, which the services must not depend on, and the API figure
// needs the whole suite (tests/harness). Without -bench, `go test` compiles
// them and runs only the unit test of Goodput, the sweep's knee, which is
// here, outside the test files, so that test is an external one.
package bench
