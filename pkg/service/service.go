// Package service builds what every service of the suite starts with, the
// same way in each: the settings they share, the JSON logger, the metrics
// registry, the fail points, the database with its migrations and the HTTP
// server with its admin group, health and metrics, all run and stopped by
// one owner. A consumer service gets the rest from Consumer (inbox, version
// guard, batching, router, dead letters, replay, lag and the gap sweeper);
// a service adds only its own domain, storage and routes.
package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"golang.org/x/sync/errgroup"

	"github.com/reliable-orders/fulfillment/pkg/admin"
	"github.com/reliable-orders/fulfillment/pkg/apispec"
	"github.com/reliable-orders/fulfillment/pkg/dlq"
	"github.com/reliable-orders/fulfillment/pkg/envconfig"
	"github.com/reliable-orders/fulfillment/pkg/failpoint"
	"github.com/reliable-orders/fulfillment/pkg/httpapi"
	"github.com/reliable-orders/fulfillment/pkg/idempotency"
	"github.com/reliable-orders/fulfillment/pkg/inbox"
	"github.com/reliable-orders/fulfillment/pkg/observability"
	"github.com/reliable-orders/fulfillment/pkg/outbox"
	"github.com/reliable-orders/fulfillment/pkg/postgres"
	"github.com/reliable-orders/fulfillment/pkg/retention"
	"github.com/reliable-orders/fulfillment/pkg/tracing"
)

// Identity is what a service declares about itself: the defaults of the
// settings every service shares.
type Identity struct {
	// Name names the service in logs, in the events it produces and, for a
	// consumer, its default consumer group: "inventory-service".
	Name string
	// Database is the default DB_NAME: "inventory".
	Database string
	// Port is the default port of HTTP_ADDR: 8083.
	Port int
	// FailPoints are the fail points the service declares, each an
	// exported constant next to the code that fires it; FAILPOINTS and
	// PUT /admin/failpoints/{name} arm only these. A service that adds a
	// relay declares outbox.FailPoints(); ReadConsumerConfig adds the
	// consumer kit's own.
	FailPoints []string
}

// Config is the part of the environment every service shares (README.md,
// Configuration).
type Config struct {
	// Name is the service's Identity.Name; it is not read from the
	// environment.
	Name        string
	DatabaseURL string
	// DatabasePassword (DATABASE_PASSWORD, or the file
	// DATABASE_PASSWORD_FILE names) is the password of DATABASE_URL's user
	// when the URL holds none; ServerURL puts the two together.
	DatabasePassword string
	DBName           string
	HTTPAddr         string
	AdminToken       string
	LogLevel         string
	// FailPoints is FAILPOINTS, the points armed at start.
	FailPoints string
	// FailPointNames are the service's declared fail points
	// (Identity.FailPoints); they are not read from the environment.
	FailPointNames []string
	// Mode is SUITE_MODE: ModeProduction or ModeDevelopment
	// (docs/security.md).
	Mode string
	// FailPointsEnabled (FAILPOINTS_ENABLED) serves PUT
	// /admin/failpoints/{name} and lets FAILPOINTS arm fail points.
	FailPointsEnabled bool
	// ProfilingEnabled (PPROF_ENABLED) serves /admin/debug/pprof/.
	ProfilingEnabled bool
	// DB bounds the waits on the service's database.
	DB postgres.Timeouts
	// Admission bounds the business requests served at once
	// (HTTP_MAX_IN_FLIGHT, HTTP_QUEUE_WAIT, HTTP_QUEUE_INTERVAL); a MaxInFlight of 0 is
	// httpapi.DefaultMaxInFlight of the database pool.
	Admission httpapi.Admission
	// Idempotency is how long Idempotency-Key answers are kept
	// (IDEMPOTENCY_KEY_TTL).
	Idempotency idempotency.Config
	// Retention is how long the shared tables keep finished rows and how
	// the pruner deletes the older ones (RETENTION_*).
	Retention Retention
	// Tracing is the service's OpenTelemetry tracing (OTEL_*).
	Tracing tracing.Config
	// MemoryLimitMiB is the Go runtime's soft memory limit
	// (MEMORY_LIMIT_MIB); 0 leaves the runtime's own, and so does a
	// GOMEMLIMIT in the environment, which the runtime has applied.
	MemoryLimitMiB int
}

// DefaultMemoryLimitMiB is MEMORY_LIMIT_MIB's default. A consumer's live
// heap in a backlog is a few tens of MiB; without a limit the collector
// lets garbage grow to as much again before it runs, which put one over
// 100 MiB resident. Near the limit it collects sooner instead; it is soft,
// so a service that needs more still gets it. It is not lower because the
// limit counts all of the runtime's memory (stacks, buffers, metadata), and
// a limit below what a busy service holds anyway makes the collector run
// without pause.
const DefaultMemoryLimitMiB = 80

// The values of SUITE_MODE.
const (
	// ModeProduction, the default, refuses missing, short and published
	// secrets.
	ModeProduction = "production"
	// ModeDevelopment is what `make run` and the tests set.
	ModeDevelopment = "development"
)

// ReadConfig reads DATABASE_URL, DATABASE_PASSWORD, DB_NAME, HTTP_ADDR,
// ADMIN_TOKEN (the secrets also from a file, envconfig.Reader.Secret), LOG_LEVEL,
// FAILPOINTS, SUITE_MODE, FAILPOINTS_ENABLED, PPROF_ENABLED,
// HTTP_MAX_IN_FLIGHT, HTTP_QUEUE_WAIT, HTTP_QUEUE_INTERVAL, IDEMPOTENCY_KEY_TTL, the retention
// settings (ReadRetention), MEMORY_LIMIT_MIB, the tracing settings
// (tracing.ReadConfig) and the database timeouts
// (postgres.ReadTimeouts) through r, with id's defaults. r collects the
// malformed values with the service's own, so a service reports all at
// once.
func ReadConfig(r *envconfig.Reader, id Identity) Config {
	mode := strings.ToLower(r.String("SUITE_MODE", ModeProduction))
	// A development service listens on this machine only unless told
	// otherwise, since its admin API may be open; elsewhere every
	// interface, behind the required ADMIN_TOKEN.
	addr := fmt.Sprintf(":%d", id.Port)
	if mode == ModeDevelopment {
		addr = fmt.Sprintf("127.0.0.1:%d", id.Port)
	}
	return Config{
		Name:              id.Name,
		DatabaseURL:       r.String("DATABASE_URL", postgres.DefaultServerURL),
		DatabasePassword:  r.Secret("DATABASE_PASSWORD", ""),
		DBName:            r.String("DB_NAME", id.Database),
		HTTPAddr:          r.String("HTTP_ADDR", addr),
		AdminToken:        r.Secret("ADMIN_TOKEN", ""),
		LogLevel:          strings.ToLower(r.String("LOG_LEVEL", "info")),
		FailPoints:        r.String("FAILPOINTS", ""),
		FailPointNames:    id.FailPoints,
		Mode:              mode,
		FailPointsEnabled: r.Bool("FAILPOINTS_ENABLED", false),
		ProfilingEnabled:  r.Bool("PPROF_ENABLED", false),
		DB:                postgres.ReadTimeouts(r),
		Admission: httpapi.Admission{
			MaxInFlight:   r.Int("HTTP_MAX_IN_FLIGHT", 0),
			QueueWait:     r.Duration("HTTP_QUEUE_WAIT", httpapi.DefaultQueueWait),
			QueueInterval: r.Duration("HTTP_QUEUE_INTERVAL", httpapi.DefaultQueueInterval),
		},
		Idempotency:    idempotency.ReadConfig(r),
		Retention:      ReadRetention(r),
		MemoryLimitMiB: memoryLimit(r),
		Tracing:        tracing.ReadConfig(r, id.Name),
	}
}

// Retention is how long the shared tables keep their finished rows
// (docs/decisions.md, Bounded tables). Each service prunes the tables it
// has: the outbox with a relay, the dedup rows and dead letters in a
// consumer.
type Retention struct {
	// Pruner is RETENTION_INTERVAL and RETENTION_BATCH.
	Pruner retention.Config
	// OutboxSent (RETENTION_OUTBOX_SENT) keeps SENT outbox rows.
	OutboxSent time.Duration
	// ProcessedEvents (RETENTION_PROCESSED_EVENTS) keeps dedup rows: an
	// event delivered again inside it is a duplicate.
	ProcessedEvents time.Duration
	// DeadLetters (RETENTION_DEAD_LETTERS) keeps REPLAYED dead letters.
	DeadLetters time.Duration
}

// Bounds of the retention windows: MinDedupRetention keeps a dedup row
// past any redelivery the consumer itself causes (retries, a rebalance,
// a restart) and a day of outage; MaxRetention bounds the tables.
const (
	MinRetention      = time.Hour
	MinDedupRetention = 24 * time.Hour
	MaxRetention      = 365 * 24 * time.Hour
)

// ReadRetention reads RETENTION_INTERVAL, RETENTION_BATCH,
// RETENTION_OUTBOX_SENT, RETENTION_PROCESSED_EVENTS and
// RETENTION_DEAD_LETTERS through r.
func ReadRetention(r *envconfig.Reader) Retention {
	return Retention{
		Pruner: retention.Config{
			Interval: r.Duration("RETENTION_INTERVAL", retention.DefaultInterval),
			Batch:    r.Int("RETENTION_BATCH", retention.DefaultBatch),
		},
		OutboxSent:      r.Duration("RETENTION_OUTBOX_SENT", outbox.DefaultSentRetention),
		ProcessedEvents: r.Duration("RETENTION_PROCESSED_EVENTS", inbox.DefaultDedupRetention),
		DeadLetters:     r.Duration("RETENTION_DEAD_LETTERS", dlq.DefaultResolvedRetention),
	}
}

// Validate reports every unusable setting, naming its variable; zero
// windows take the defaults.
func (c Retention) Validate() error {
	errs := []error{c.Pruner.Validate()}
	check := func(name string, d, lowest time.Duration) {
		if d != 0 && (d < lowest || d > MaxRetention) {
			errs = append(errs, fmt.Errorf("%s=%s: want %s to %s", name, d, lowest, MaxRetention))
		}
	}
	check("RETENTION_OUTBOX_SENT", c.OutboxSent, MinRetention)
	check("RETENTION_PROCESSED_EVENTS", c.ProcessedEvents, MinDedupRetention)
	check("RETENTION_DEAD_LETTERS", c.DeadLetters, MinRetention)
	return errors.Join(errs...)
}

func (c Retention) withDefaults() Retention {
	c.OutboxSent = cmp.Or(c.OutboxSent, outbox.DefaultSentRetention)
	c.ProcessedEvents = cmp.Or(c.ProcessedEvents, inbox.DefaultDedupRetention)
	c.DeadLetters = cmp.Or(c.DeadLetters, dlq.DefaultResolvedRetention)
	return c
}

// memoryLimit is MEMORY_LIMIT_MIB, or 0 when GOMEMLIMIT is set: the
// runtime applied that one at start, and it wins.
func memoryLimit(r *envconfig.Reader) int {
	if r.String("GOMEMLIMIT", "") != "" {
		return 0
	}
	return r.Int("MEMORY_LIMIT_MIB", DefaultMemoryLimitMiB)
}

// Validate reports every unusable setting, naming its variable.
func (c Config) Validate() error {
	errs := []error{c.validateMode(), c.validateAdmin()}
	if c.Name == "" {
		errs = append(errs, errors.New("the service has no name"))
	}
	if c.DBName == "" || len(c.DBName) > 63 {
		errs = append(errs, fmt.Errorf("DB_NAME=%q: want 1-63 characters", c.DBName))
	} else if _, err := c.DatabaseDSN(); err != nil {
		errs = append(errs, fmt.Errorf("DATABASE_URL: %w", err))
	}
	if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
		errs = append(errs, fmt.Errorf("HTTP_ADDR=%q: %w", c.HTTPAddr, err))
	}
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("LOG_LEVEL=%q: want debug, info, warn or error", c.LogLevel))
	}
	if c.MemoryLimitMiB < 0 {
		errs = append(errs, fmt.Errorf("MEMORY_LIMIT_MIB=%d: want 0 (the Go runtime's default) or more", c.MemoryLimitMiB))
	}
	if _, err := c.failPointRegistry(); err != nil {
		errs = append(errs, fmt.Errorf("FAILPOINTS: %w", err))
	} else if c.FailPoints != "" && !c.FailPointsEnabled {
		errs = append(errs, errors.New("FAILPOINTS is set but fail points are disabled: set FAILPOINTS_ENABLED=true (drills and tests only)"))
	}
	if err := c.DB.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Admission.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Idempotency.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Retention.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.tracing().Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// tracing is the tracing configuration, named after the service when it
// names nothing (a Config built in code rather than read).
func (c Config) tracing() tracing.Config {
	t := c.Tracing
	t.ServiceName = cmp.Or(t.ServiceName, c.Name)
	return t
}

// failPointRegistry declares the service's fail points and arms what
// FAILPOINTS says.
func (c Config) failPointRegistry() (*failpoint.Registry, error) {
	return failpoint.New(failpoint.Config{Names: c.FailPointNames, Spec: c.FailPoints})
}

// ServerURL is DATABASE_URL with DatabasePassword as its user's password.
func (c Config) ServerURL() (string, error) {
	return postgres.WithPassword(c.DatabaseURL, c.DatabasePassword)
}

// DatabaseDSN is the URL of the service's own database.
func (c Config) DatabaseDSN() (string, error) {
	server, err := c.ServerURL()
	if err != nil {
		return "", err
	}
	return postgres.WithDatabase(server, c.DBName)
}

// Options are what a service adds to the shared start.
type Options struct {
	// Migrations are the schemas to migrate, the shared ones (outbox,
	// inbox, …) before the service's own.
	Migrations []postgres.MigrationSet
	// Pool bounds the database connections; the zero value is postgres's
	// default. NewConsumer sets it from DB_MAX_CONNS.
	Pool postgres.PoolConfig
	// MapError turns the service's own errors into HTTP answers; nil: none.
	MapError func(error) *httpapi.Error
	// SpanProcessors are further processors of the service's spans, a
	// test's recorder (sdk/trace/tracetest); nil: none.
	SpanProcessors []sdktrace.SpanProcessor
}

// Service is a started service's shared parts. Build the service's own
// parts on them, add its long-running tasks with Go, then call Run.
type Service struct {
	Config     Config
	Logger     *slog.Logger
	Registry   *prometheus.Registry
	FailPoints *failpoint.Registry
	DB         *sqlx.DB
	HTTP       *httpapi.Server
	// Admin is the /admin group, behind ADMIN_TOKEN when one is set.
	Admin *echo.Group
	// Tracing records the service's spans; GET /admin/traces reads the
	// recent ones.
	Tracing *tracing.Tracing

	tasks []func(ctx context.Context) error
	// retain are the retention rules of the service's tables, run by one
	// pruner from Run.
	retain []retention.Rule
	// ops describe the registered routes; document is their OpenAPI
	// document, built by Run.
	ops      []apispec.Operation
	document []byte
}

// New opens the service's parts: logger, registry, fail points (with PUT
// /admin/failpoints/{name} when FAILPOINTS_ENABLED), the database, created and migrated if needed,
// and the HTTP server. Every state-changing route of the server, its admin
// group's included, takes an Idempotency-Key (pkg/idempotency): the keys
// live in the service's database (idempotency.Schema, migrated before
// opts.Migrations) and a sweeper deletes them after IDEMPOTENCY_KEY_TTL.
// Close releases the database once Run has returned.
func New(ctx context.Context, cfg Config, stdout io.Writer, opts Options) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Disabled fail points are an empty registry: every Inject is inert
	// and nothing can arm one.
	fp, err := cfg.failPointRegistry()
	if err != nil {
		return nil, fmt.Errorf("FAILPOINTS: %w", err)
	}
	if cfg.MemoryLimitMiB > 0 {
		debug.SetMemoryLimit(int64(cfg.MemoryLimitMiB) << 20)
	}
	opts.Pool.Timeouts = cfg.DB
	cfg.Retention = cfg.Retention.withDefaults()
	migrations := append([]postgres.MigrationSet{idempotency.Schema()}, opts.Migrations...)
	server, err := cfg.ServerURL()
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	db, err := postgres.OpenService(ctx, server, cfg.DBName, opts.Pool, migrations...)
	if err != nil {
		return nil, err
	}
	traces, err := tracing.New(ctx, cfg.tracing(), opts.SpanProcessors...)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("tracing: %w", err)
	}
	logger := observability.NewLogger(stdout, cfg.Name, cfg.LogLevel)
	reg := observability.NewRegistry()
	admission := cfg.Admission
	if admission.MaxInFlight == 0 {
		admission.MaxInFlight = httpapi.DefaultMaxInFlight(cmp.Or(opts.Pool.MaxOpen, postgres.DefaultMaxOpen))
	}
	srv := httpapi.New(httpapi.Config{
		Addr:       cfg.HTTPAddr,
		AdminToken: cfg.AdminToken,
		Ready:      func(ctx context.Context) error { return db.PingContext(ctx) },
		Registry:   reg,
		MapError:   opts.MapError,
		Profiling:  cfg.ProfilingEnabled,
		Admission:  admission,
		// A development service on loopback has no credentials on any
		// route: only this machine may name it (docs/security.md).
		LoopbackHostOnly: cfg.Development() && IsLoopback(cfg.HTTPAddr),
		Tracing:          traces.Provider(),
	}, logger)
	keys := idempotency.NewStore(db, cfg.Idempotency)
	// After routing and admission (httpapi.New's), so a shed request
	// consumes no key. The admin routes get theirs in the admin group,
	// after the admin token's check: an unauthenticated request must
	// neither run a command nor read a key's answer.
	srv.Echo.Use(keys.Middleware(logger, reg, func(c echo.Context) bool { return adminPath(c.Request().URL.Path) }))
	adminGroup := srv.Admin()
	adminGroup.Use(keys.Middleware(logger, reg, nil))
	s := &Service{Config: cfg, Logger: logger, Registry: reg, FailPoints: fp, DB: db, HTTP: srv, Admin: adminGroup, Tracing: traces,
		ops: apispec.Common(cfg.ProfilingEnabled)}
	s.serveDocument()
	admin.RegisterTraces(s.Admin, traces.Recent())
	s.Describe(admin.TracesOperations()...)
	if cfg.FailPointsEnabled {
		admin.RegisterFailPoints(s.Admin, fp)
		s.Describe(admin.FailPointOperations()...)
	}
	s.Go(srv.Run)
	s.Go(func(ctx context.Context) error {
		return keys.RunSweeper(ctx, func(err error) { logger.WarnContext(ctx, "sweep idempotency keys", "error", err) })
	})
	return s, nil
}

// adminPath reports whether path is served by the admin group.
func adminPath(path string) bool {
	return path == "/admin" || strings.HasPrefix(path, "/admin/")
}

// AddRelay runs the outbox relay with the service: committed rows of the
// service's outbox go to sink. The service must declare the relay's fail
// points (outbox.FailPoints() in Identity.FailPoints), so they can be
// armed like its own. The relay relays at once when it is woken
// (Wake it once a transaction that added rows has committed), or when a
// relay of another instance that was woken notifies it, and polls
// otherwise. It also exposes the outbox: outbox_pending_events,
// outbox_oldest_pending_age_seconds and the relay's counters on /metrics,
// and GET /admin/outbox, GET /admin/outbox/{eventId} and POST
// /admin/outbox/{eventId}/republish. SENT rows are deleted after
// RETENTION_OUTBOX_SENT. Migrate outbox.Schema().
func (s *Service) AddRelay(cfg outbox.RelayConfig, sink outbox.Sink) (*outbox.Relay, error) {
	dsn, err := s.Config.DatabaseDSN()
	if err != nil {
		return nil, err
	}
	for _, name := range outbox.FailPoints() {
		if !slices.Contains(s.Config.FailPointNames, name) {
			return nil, fmt.Errorf("outbox relay: fail point %s is not declared: add outbox.FailPoints() to the service's Identity.FailPoints", name)
		}
	}
	cfg.ListenURL, cfg.LockURL = dsn, dsn
	cfg.Tracing = s.Tracing.Provider()
	s.Retain(outbox.RetentionRule(s.Config.Retention.OutboxSent))
	relay, err := outbox.NewRelay(s.DB, sink, cfg, s.Logger, outbox.NewRelayMetrics(s.Registry), s.FailPoints)
	if err != nil {
		return nil, fmt.Errorf("outbox relay: %w", err)
	}
	s.Registry.MustRegister(outbox.NewBacklogCollector(s.DB, s.Logger))
	admin.RegisterOutbox(s.Admin, s.DB)
	s.Describe(admin.OutboxOperations()...)
	s.Go(relay.Run)
	return relay, nil
}

// Retain adds retention rules for the service's own tables: Run prunes
// them every RETENTION_INTERVAL, in batches of RETENTION_BATCH rows, and
// /metrics shows their sizes (db_table_size_bytes) and the rows deleted
// (retention_deleted_rows_total).
func (s *Service) Retain(rules ...retention.Rule) {
	s.retain = append(s.retain, rules...)
}

// startRetention registers the size collector and adds the pruner of the
// rules given to Retain. The idempotency keys are measured too; their own
// sweeper deletes them.
func (s *Service) startRetention() {
	tables := []string{"idempotency_keys"}
	for _, r := range s.retain {
		tables = append(tables, r.Table)
	}
	s.Registry.MustRegister(retention.NewSizeCollector(s.DB, s.Logger, tables...))
	if len(s.retain) == 0 {
		return
	}
	p := retention.New(s.DB, s.Config.Retention.Pruner, s.Registry, s.retain...)
	s.Go(func(ctx context.Context) error {
		return p.Run(ctx, func(err error) { s.Logger.WarnContext(ctx, "retention", "error", err) })
	})
}

// Go adds a task that runs from Run until ctx ends; an error it returns
// stops the service.
func (s *Service) Go(task func(ctx context.Context) error) {
	s.tasks = append(s.tasks, task)
}

// Run runs the HTTP server and every task until ctx ends or one fails, and
// returns nil on a clean shutdown. attrs are logged with the start. It
// refuses to start when the routes registered and the operations described
// differ (Describe).
func (s *Service) Run(ctx context.Context, attrs ...any) error {
	if err := s.buildDocument(); err != nil {
		return err
	}
	s.startRetention()
	g, ctx := errgroup.WithContext(ctx)
	for _, task := range s.tasks {
		g.Go(func() error { return task(ctx) })
	}
	s.Logger.InfoContext(ctx, "service started", append([]any{"addr", s.Config.HTTPAddr}, attrs...)...)
	err := g.Wait()
	// The spans still queued for the exporter leave before the process
	// does, within a bound: a collector that is away must not hold the
	// shutdown.
	flush, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingShutdownTimeout)
	defer cancel()
	if ferr := s.Tracing.Shutdown(flush); ferr != nil {
		s.Logger.WarnContext(ctx, "export the last spans", "error", ferr)
	}
	return err
}

// tracingShutdownTimeout bounds the export of the last spans at shutdown.
const tracingShutdownTimeout = 5 * time.Second

// Close closes the database.
func (s *Service) Close() error {
	return s.DB.Close()
}
