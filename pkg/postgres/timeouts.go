package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strconv"
	"time"

	"github.com/lib/pq"

	"github.com/reliable-orders/fulfillment/pkg/envconfig"
)

// Timeouts bound how long a service waits on Postgres (README.md,
// Configuration): without them a connection whose network vanished holds
// its caller until TCP gives up, hours later.
type Timeouts struct {
	// Connect bounds dialling and the start-up handshake
	// (DB_CONNECT_TIMEOUT); Postgres counts it in whole seconds.
	Connect time.Duration
	// Statement is the server's statement_timeout (DB_STATEMENT_TIMEOUT):
	// a statement running longer, lock waits included, is cancelled.
	Statement time.Duration
	// KeepAlive is the TCP keepalive idle time and probe interval
	// (DB_KEEPALIVE): a peer that stops answering three probes in a row
	// is declared dead, about four intervals after the last traffic.
	KeepAlive time.Duration
}

// DefaultTimeouts are the defaults of README.md (Configuration).
func DefaultTimeouts() Timeouts {
	return Timeouts{Connect: 5 * time.Second, Statement: 30 * time.Second, KeepAlive: 10 * time.Second}
}

// ReadTimeouts reads DB_CONNECT_TIMEOUT, DB_STATEMENT_TIMEOUT and
// DB_KEEPALIVE through r: every program opening the services' databases
// reads them here, under the same names and defaults.
func ReadTimeouts(r *envconfig.Reader) Timeouts {
	d := DefaultTimeouts()
	return Timeouts{
		Connect:   r.Duration("DB_CONNECT_TIMEOUT", d.Connect),
		Statement: r.Duration("DB_STATEMENT_TIMEOUT", d.Statement),
		KeepAlive: r.Duration("DB_KEEPALIVE", d.KeepAlive),
	}
}

// Validate reports every unusable timeout, naming its variable.
func (t Timeouts) Validate() error {
	var errs []error
	if t.Connect < time.Second {
		errs = append(errs, fmt.Errorf("DB_CONNECT_TIMEOUT=%s: want at least 1s", t.Connect))
	}
	if t.Statement < time.Millisecond {
		errs = append(errs, fmt.Errorf("DB_STATEMENT_TIMEOUT=%s: want at least 1ms", t.Statement))
	}
	if t.KeepAlive < time.Second {
		errs = append(errs, fmt.Errorf("DB_KEEPALIVE=%s: want at least 1s", t.KeepAlive))
	}
	return errors.Join(errs...)
}

// withDefaults fills t's zero fields from DefaultTimeouts.
func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts()
	if t.Connect <= 0 {
		t.Connect = d.Connect
	}
	if t.Statement <= 0 {
		t.Statement = d.Statement
	}
	if t.KeepAlive <= 0 {
		t.KeepAlive = d.KeepAlive
	}
	return t
}

// Connector returns a connector to dsn whose connections prepare each
// statement with arguments once and apply t: the
// connect and statement timeouts travel in the URL (a value the URL
// already sets wins), the keepalives are set on the socket. When ioTimeout
// is positive, every read and write on a connection must finish within it,
// or the connection fails: a session that must notice a silent network in
// seconds (the relay's lock) uses it, since keepalives do not fire while
// a peer still acknowledges packets it never answers.
func Connector(dsn string, t Timeouts, ioTimeout time.Duration) (driver.Connector, error) {
	t = t.withDefaults()
	u, err := parseURL(dsn)
	if err != nil {
		return nil, err
	}
	q := u.Query()
	if q.Get("connect_timeout") == "" {
		q.Set("connect_timeout", strconv.Itoa(int((t.Connect+time.Second-1)/time.Second)))
	}
	if q.Get("statement_timeout") == "" {
		q.Set("statement_timeout", strconv.FormatInt(t.Statement.Milliseconds(), 10))
	}
	if q.Get("plan_cache_mode") == "" {
		// Prepared statements (preparingConnector) get the plans unnamed
		// ones got: a generic plan, made once, went stale on a table a
		// backlog grows faster than autovacuum analyses it.
		q.Set("plan_cache_mode", "force_custom_plan")
	}
	u.RawQuery = q.Encode()
	c, err := pq.NewConnector(u.String())
	if err != nil {
		return nil, fmt.Errorf("database url %s: %s", Redact(dsn), Redact(err.Error()))
	}
	c.Dialer(dialer{d: net.Dialer{KeepAliveConfig: net.KeepAliveConfig{
		Enable: true, Idle: t.KeepAlive, Interval: t.KeepAlive, Count: 3}}, io: ioTimeout})
	return preparingConnector{Connector: c}, nil
}

// dialer dials with keepalives and, when io is positive, bounds every read
// and write.
type dialer struct {
	d  net.Dialer
	io time.Duration
}

func (d dialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

func (d dialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, network, address)
}

func (d dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := d.d.DialContext(ctx, network, address)
	if err != nil || d.io <= 0 {
		return c, err
	}
	return &boundedConn{Conn: c, io: d.io}, nil
}

// boundedConn fails a read or write that takes longer than io.
type boundedConn struct {
	net.Conn
	io time.Duration
}

func (c *boundedConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.io)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

func (c *boundedConn) Write(p []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.io)); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// SetDeadline is refused: lib/pq sets and clears a deadline around its
// start-up handshake, which would lift the bound.
func (c *boundedConn) SetDeadline(time.Time) error { return nil }

// openDB opens a pool over dsn with t.
func openDB(dsn string, t Timeouts) (*sql.DB, error) {
	c, err := Connector(dsn, t, 0)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// userinfo matches the password of a URL that url.Parse may refuse.
var userinfo = regexp.MustCompile(`(://[^:/@\s]*):[^@\s]*@`)

// Redact returns s with the password of every database URL in it
// replaced, so a URL (or an error quoting one) can be logged.
func Redact(s string) string {
	return userinfo.ReplaceAllString(s, "${1}:xxxxx@")
}

// parseURL parses a postgres:// URL; its error never quotes the password.
func parseURL(dsn string) (*url.URL, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		return nil, fmt.Errorf("parse database url %q: %w", Redact(dsn), err)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("database url must start with postgres://, got %q", u.Scheme)
	}
	return u, nil
}
