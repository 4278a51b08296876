package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
)

// maxPrepared bounds the statements one connection keeps prepared. The
// services send a few dozen distinct statements; the bound only keeps a
// caller that builds its SQL text from values from growing a
// connection's statements without end.
const maxPrepared = 256

// preparingConnector gives its connections a cache of prepared statements.
//
// lib/pq runs a statement with arguments as an unnamed statement: a Parse
// and a Describe, a round trip, then a Bind and an Execute, another, and
// Postgres parses the statement every time. The services' transactions
// are runs of short statements, so the round trips were much of their
// time; each connection here prepares a statement the first time it runs
// it and then only binds and executes it: one round trip, no parse. Each
// run is still planned with its values (Connector sets plan_cache_mode
// force_custom_plan), as an unnamed statement is. pgx has such a cache of
// its own; lib/pq, the driver this suite is built on, has none, so it is
// written here.
type preparingConnector struct {
	driver.Connector
}

func (c preparingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pc, ok := conn.(pqConn)
	if !ok {
		return conn, nil
	}
	return &preparingConn{pqConn: pc, stmts: map[string]preparedStmt{}}, nil
}

// pqConn is what lib/pq's connection offers database/sql; preparingConn
// offers the same.
type pqConn interface {
	driver.Conn
	driver.ConnPrepareContext
	driver.ConnBeginTx
	driver.QueryerContext
	driver.ExecerContext
	driver.Pinger
	driver.NamedValueChecker
}

// preparedStmt is what lib/pq's statement offers.
type preparedStmt interface {
	driver.Stmt
	driver.StmtQueryContext
	driver.StmtExecContext
}

// preparingConn runs every statement with arguments as a statement it
// prepared on its first run. database/sql never uses a connection from two
// goroutines at once, so the cache needs no lock.
type preparingConn struct {
	pqConn
	stmts map[string]preparedStmt
}

// prepared returns query prepared on this connection.
func (c *preparingConn) prepared(ctx context.Context, query string) (preparedStmt, error) {
	if st, ok := c.stmts[query]; ok {
		return st, nil
	}
	if len(c.stmts) >= maxPrepared {
		c.forget()
	}
	s, err := c.pqConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	st, ok := s.(preparedStmt)
	if !ok {
		_ = s.Close()
		return nil, driver.ErrSkip
	}
	c.stmts[query] = st
	return st, nil
}

// forget closes every statement the connection keeps.
func (c *preparingConn) forget() {
	for q, st := range c.stmts {
		_ = st.Close()
		delete(c.stmts, q)
	}
}

// QueryContext runs a query with arguments as a prepared statement and
// one without through lib/pq's simple protocol, a single round trip
// already.
func (c *preparingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if len(args) == 0 {
		return c.pqConn.QueryContext(ctx, query, args)
	}
	st, err := c.prepared(ctx, query)
	if errors.Is(err, driver.ErrSkip) {
		return c.pqConn.QueryContext(ctx, query, args)
	}
	if err != nil {
		return nil, err
	}
	return st.QueryContext(ctx, args)
}

// ExecContext runs a statement with arguments as a prepared statement,
// as QueryContext does.
func (c *preparingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if len(args) == 0 {
		return c.pqConn.ExecContext(ctx, query, args)
	}
	st, err := c.prepared(ctx, query)
	if errors.Is(err, driver.ErrSkip) {
		return c.pqConn.ExecContext(ctx, query, args)
	}
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args)
}

// Close closes the connection; its statements go with its session.
func (c *preparingConn) Close() error {
	c.stmts = nil
	return c.pqConn.Close()
}
