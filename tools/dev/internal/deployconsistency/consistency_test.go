package deployconsistency_test

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/reliable-orders/fulfillment/scripts/devrun"
	"github.com/reliable-orders/fulfillment/scripts/suite"
	"github.com/reliable-orders/fulfillment/tools/dev/internal/deployconsistency"
)

// repo holds the files the checks read, as they are in the work tree.
type repo struct {
	compose, initSQL, prometheus, makefile, goWork []byte
	readme                                         []byte
	dockerignore, dockerfile                       []byte
	base                                           fstest.MapFS
	grafana                                        fstest.MapFS // deploy/grafana
	documented                                     map[string]bool
}

// repoRoot is the directory of go.work above the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.work above the test's directory")
		}
		dir = parent
	}
}

func loadRepo(t *testing.T) repo {
	t.Helper()
	dir := repoRoot(t)
	read := func(rel string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	r := repo{
		compose:      read("docker-compose.yml"),
		initSQL:      read("deploy/postgres/init.sql"),
		prometheus:   read("deploy/prometheus/prometheus.yml"),
		makefile:     read("Makefile"),
		goWork:       read("go.work"),
		dockerignore: read(".dockerignore"),
		dockerfile:   read("Dockerfile"),
		readme:       read("README.md"),
		base:         fstest.MapFS{},
		grafana:      fstest.MapFS{},
	}
	var err error
	if r.documented, err = deployconsistency.DocumentedEnv(r.readme); err != nil {
		t.Fatal(err)
	}
	grafana := os.DirFS(filepath.Join(dir, "deploy/grafana"))
	err = fs.WalkDir(grafana, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(grafana, name)
		r.grafana[name] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "deploy/base/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no deploy/base/*.yaml: %v", err)
	}
	for _, f := range files {
		r.base[filepath.Base(f)] = &fstest.MapFile{Data: read(filepath.Join("deploy/base", filepath.Base(f)))}
	}
	return r
}

// check runs every check of r against services.
func (r repo) check(services []suite.Service) []error {
	var errs []error
	errs = append(errs, deployconsistency.CheckCompose(r.compose, services, r.documented)...)
	errs = append(errs, deployconsistency.CheckComposeConsole(r.compose, services, r.documented)...)
	errs = append(errs, deployconsistency.CheckTopics(r.compose)...)
	errs = append(errs, deployconsistency.CheckKustomize(r.base, services, r.documented)...)
	errs = append(errs, deployconsistency.CheckPrometheus(r.prometheus, services)...)
	errs = append(errs, deployconsistency.CheckInitSQL(r.initSQL, services)...)
	errs = append(errs, deployconsistency.CheckMakefile(r.makefile, services)...)
	errs = append(errs, deployconsistency.CheckModules(r.goWork, r.makefile)...)
	errs = append(errs, deployconsistency.CheckMonitoring(r.compose, r.prometheus, r.grafana)...)
	if p, err := deployconsistency.LoadCompose(context.Background(), r.compose); err != nil {
		errs = append(errs, err)
	} else {
		errs = append(errs, deployconsistency.CheckComposeProject(p, services)...)
		cc := devrun.LoadComposeConfig(func(string) string { return "" })
		if u, err := url.Parse(cc.FaultProxyURL); err != nil {
			errs = append(errs, err)
		} else {
			errs = append(errs, deployconsistency.CheckFaultProxy(p, cc.BrokerService, addrPort(u.Host))...)
		}
		errs = append(errs, r.checkPorts(services, deployconsistency.PublishedPorts(p))...)
	}
	errs = append(errs, deployconsistency.CheckDockerignore(r.dockerignore)...)
	errs = append(errs, deployconsistency.CheckDockerfile(r.dockerfile)...)
	for _, s := range services {
		env := map[string]string{}
		for _, kv := range devrun.ServiceEnv(nil, services, s, suite.DefaultDatabaseURL, suite.DefaultKafkaBrokers) {
			name, value, _ := strings.Cut(kv, "=")
			env[name] = value
		}
		local := func(s suite.Service) string { return s.LocalURL() }
		errs = append(errs, deployconsistency.CheckEnv("runner: "+s.Name, env, s, services, r.documented, s.LocalAddr(), local)...)
	}
	console := devrun.LoadConfig(func(string) string { return "" }).Console
	for _, kv := range devrun.ConsoleEnv(nil, services, console, suite.DefaultDatabaseURL, suite.DefaultKafkaBrokers, devrun.DefaultControlAddr) {
		name, value, _ := strings.Cut(kv, "=")
		if !r.documented[name] {
			errs = append(errs, fmt.Errorf("runner: console: %s is not a variable of README.md (Configuration)", name))
		}
		if name == "HTTP_ADDR" && value != suite.LoopbackAddr(suite.ConsolePort) {
			errs = append(errs, fmt.Errorf("runner: console: HTTP_ADDR=%q, want %q", value, suite.LoopbackAddr(suite.ConsolePort)))
		}
	}
	return errs
}

// checkPorts compares the README's ports table with the ports make run
// uses (services, control API, embedded broker, DATABASE_URL's default) and
// those compose publishes, with make compose-control's control API.
func (r repo) checkPorts(services []suite.Service, published map[string]int) []error {
	table, err := deployconsistency.PortsTable(r.readme)
	if err != nil {
		return []error{err}
	}
	run := map[string]int{
		"control-api": addrPort(devrun.DefaultControlAddr),
		"redpanda":    addrPort(suite.DefaultKafkaBrokers),
	}
	if u, err := url.Parse(suite.DefaultDatabaseURL); err == nil {
		run["postgres"], _ = strconv.Atoi(u.Port())
	}
	for _, s := range services {
		run[s.FullName()] = s.Port
	}
	if c := devrun.LoadConfig(func(string) string { return "" }).Console; c.Port != 0 {
		run[c.Name] = c.Port
	}
	compose := maps.Clone(published)
	compose["control-api"] = addrPort(devrun.LoadComposeConfig(func(string) string { return "" }).ControlAddr)
	return deployconsistency.CheckPorts(table, run, compose)
}

func addrPort(addr string) int {
	_, port, _ := net.SplitHostPort(addr)
	n, _ := strconv.Atoi(port)
	return n
}

func TestRepositoryIsConsistent(t *testing.T) {
	for _, err := range loadRepo(t).check(suite.Services()) {
		t.Error(err)
	}
}

// TestChecksCatchDrift breaks one file at a time and expects the checks to
// say what broke.
func TestChecksCatchDrift(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		file     string // docker-compose.yml, init.sql, prometheus.yml, Makefile, go.work, .dockerignore, Dockerfile, a deploy/base file or grafana/<path in deploy/grafana>
		old, new string
		want     string
	}{
		{"compose publishes a wrong port", "docker-compose.yml", `"127.0.0.1:8083:8083"`, `"127.0.0.1:8093:8083"`, "inventory-service: port 8083 is not published as 8083:8083"},
		{"compose listens on a wrong port", "docker-compose.yml", `HTTP_ADDR: ":8084"`, `HTTP_ADDR: ":8094"`, `points-service: HTTP_ADDR=":8094", want ":8084"`},
		{"compose names a wrong database", "docker-compose.yml", "DB_NAME: payments", "DB_NAME: payment", `payment-service: DB_NAME="payment", want "payments"`},
		{"compose uses an undocumented variable", "docker-compose.yml", "LOG_LEVEL: info", "LOGLEVEL: info", "LOGLEVEL is not a variable of README.md (Configuration)"},
		{"compose points at a wrong URL", "docker-compose.yml", "POINTS_URL: http://points-service:8084", "POINTS_URL: http://points-service:8085", "POINTS_URL="},
		{"compose builds the wrong service", "docker-compose.yml", "SERVICE: notification\n", "SERVICE: notifications\n", `build arg SERVICE="notifications"`},
		{"compose misses the console", "docker-compose.yml", "  console:\n    restart:", "  konsole:\n    restart:", "console: no such service"},
		{"compose publishes the console elsewhere", "docker-compose.yml", `"127.0.0.1:8087:8087"`, `"127.0.0.1:8088:8087"`, "console: port 8087 is not published as 8087:8087"},
		{"the console reads a wrong URL", "docker-compose.yml", "      RECONCILIATION_URL: http://reconciliation-service:8086\n      LOG_LEVEL: info\n    ports:\n      - \"127.0.0.1:8087",
			"      RECONCILIATION_URL: http://reconciliation:8086\n      LOG_LEVEL: info\n    ports:\n      - \"127.0.0.1:8087", `console: RECONCILIATION_URL="http://reconciliation:8086"`},
		{"the console without its token", "docker-compose.yml", "      HTTP_ADDR: \":8087\"\n      ADMIN_TOKEN_FILE: /run/secrets/admin_token\n", "      HTTP_ADDR: \":8087\"\n      ADMIN_TOKEN: secret\n", "console: ADMIN_TOKEN is written in the file"},
		{"compose misses a service", "docker-compose.yml", "  points-service:", "  pointz-service:", "points-service: no such service"},
		{"compose has an unknown service", "docker-compose.yml", "  points-service:", "  pointz-service:", "pointz-service is not a service of the runner's table"},
		{"compose creates topics with other partitions", "docker-compose.yml", "order-events.dlq -p 64", "order-events.dlq -p 12", "topics created with -p 12, want 64"},
		{"compose misses the DLQ topic", "docker-compose.yml", "create order-events order-events.dlq -p", "create order-events -p", "does not create order-events.dlq"},
		{"compose sets a wrong consumer group", "docker-compose.yml", "CONSUMER_GROUP: points-service", "CONSUMER_GROUP: points", `CONSUMER_GROUP="points"`},
		{"deployment listens on a wrong port", "order-service.yaml", "containerPort: 8081", "containerPort: 8091", "Deployment order-service: container ports"},
		{"deployment names a wrong database", "inventory-service.yaml", "value: inventory\n", "value: stock\n", `DB_NAME="stock"`},
		{"deployment uses a wrong image", "points-service.yaml", "image: fulfillment/points-service", "image: fulfillment/points", `image "fulfillment/points", want "fulfillment/points-service"`},
		{"service exposes a wrong port", "payment-service.yaml", "      port: 8082\n", "      port: 8092\n", "Service payment-service does not expose port 8082"},
		{"config map has an undocumented key", "configmap.yaml", "LOG_LEVEL: info", "LOG_LEVL: info", "LOG_LEVL is not a variable"},
		{"secret is missing", "notification-service.yaml", "name: fulfillment-secrets", "name: other-secrets", `envFrom Secret "other-secrets" is not in the base`},
		{"compose writes a secret", "docker-compose.yml", "ADMIN_TOKEN_FILE: /run/secrets/admin_token", "ADMIN_TOKEN: dev-admin-token", "ADMIN_TOKEN is written in the file"},
		{"compose runs in development mode", "docker-compose.yml", "  LOG_LEVEL: info\n", "  LOG_LEVEL: info\n  SUITE_MODE: development\n", "SUITE_MODE=development accepts published secrets"},
		{"compose needs a variable a fresh clone lacks", "docker-compose.yml", "FAILPOINTS_ENABLED: ${FAILPOINTS_ENABLED:-false}", "FAILPOINTS_ENABLED: ${FAILPOINTS_ENABLED:?run make up}", "required variable FAILPOINTS_ENABLED is missing a value"},
		{"compose needs a .env", "docker-compose.yml", "  secrets:\n    image: alpine:3.22\n", "  secrets:\n    image: alpine:3.22\n    env_file: .env\n", "does not load on a fresh clone"},
		{"compose has no secrets job", "docker-compose.yml", "  secrets:\n    image: alpine:3.22\n", "  keys:\n    image: alpine:3.22\n", "does not load on a fresh clone"},
		{"the proxy's listener advertises the broker", "docker-compose.yml", "proxied://faultproxy:9092", "proxied://redpanda:29092", `the listener proxied the proxy forwards to advertises "redpanda:29092", want the proxy's "faultproxy:9092"`},
		{"the proxy forwards to no listener", "docker-compose.yml", "FAULTPROXY_UPSTREAM: redpanda:29092", "FAULTPROXY_UPSTREAM: redpanda:29093", "redpanda: no --kafka-addr listener on port 29093"},
		{"the proxy forwards to the internal listener", "docker-compose.yml", "FAULTPROXY_UPSTREAM: redpanda:29092", "FAULTPROXY_UPSTREAM: redpanda:9092", `the listener internal the proxy forwards to advertises "redpanda:9092"`},
		{"the relay bypasses the proxy", "docker-compose.yml", "      KAFKA_BROKERS: faultproxy:9092\n", "", `order-service: KAFKA_BROKERS="redpanda:9092", want the fault proxy "faultproxy:9092"`},
		{"the relay does not wait for the proxy", "docker-compose.yml", "      faultproxy:\n        condition: service_healthy\n", "", "order-service: does not wait for faultproxy to be healthy"},
		{"the proxy's admin API is elsewhere", "docker-compose.yml", `"127.0.0.1:9094:9094"`, `"127.0.0.1:9095:9094"`, "faultproxy: its admin API"},
		{"no fault proxy", "docker-compose.yml", "  faultproxy:\n    build:", "  kafkaproxy:\n    build:", `depends on undefined service "faultproxy"`},
		{"console published on every interface", "docker-compose.yml", `"127.0.0.1:8080:8080"`, `"8080:8080"`, "redpanda-console: port 8080 is published on every interface; want 127.0.0.1:8080:8080"},
		{"grafana published on 0.0.0.0", "docker-compose.yml", `"127.0.0.1:3000:3000"`, `"0.0.0.0:3000:3000"`, "grafana: port 3000 is published on 0.0.0.0"},
		{"a service published on every interface", "docker-compose.yml", `"127.0.0.1:8086:8086"`, `"8086:8086"`, "reconciliation-service: port 8086 is published on every interface"},
		{"postgres with a written password", "docker-compose.yml", "POSTGRES_PASSWORD_FILE: /run/secrets/postgres_password", "POSTGRES_PASSWORD: postgres", "postgres: POSTGRES_PASSWORD is set in the environment"},
		{"postgres without its password file", "docker-compose.yml", "POSTGRES_PASSWORD_FILE: /run/secrets/postgres_password", "POSTGRES_HOST_AUTH_METHOD: trust", "postgres: POSTGRES_PASSWORD_FILE is not set"},
		{"grafana keeps admin/admin", "docker-compose.yml", "      GF_SECURITY_ADMIN_PASSWORD__FILE: /run/secrets/grafana_admin_password\n", "", "grafana: GF_SECURITY_ADMIN_PASSWORD__FILE is not set"},
		{"grafana with a written password", "docker-compose.yml", "GF_SECURITY_ADMIN_PASSWORD__FILE: /run/secrets/grafana_admin_password", "GF_SECURITY_ADMIN_PASSWORD: admin", "grafana: GF_SECURITY_ADMIN_PASSWORD is set in the environment"},
		{"a password in DATABASE_URL", "docker-compose.yml", "postgres://postgres@postgres:5432", "postgres://postgres:postgres@postgres:5432", "order-service: DATABASE_URL holds a password"},
		{"a secret from the environment", "docker-compose.yml", "ADMIN_TOKEN_FILE: /run/secrets/admin_token", "ADMIN_TOKEN: ${ADMIN_TOKEN:-}", "payment-service: ADMIN_TOKEN is set in the environment; give the service ADMIN_TOKEN_FILE"},
		{"a service without its token file", "docker-compose.yml", "  ADMIN_TOKEN_FILE: /run/secrets/admin_token\n", "", "points-service: ADMIN_TOKEN_FILE is not set"},
		{"services start before the secrets exist", "docker-compose.yml", "    secrets:\n      condition: service_completed_successfully\n    postgres:\n", "    postgres:\n", "payment-service: reads secret files but does not depend on secrets"},
		{"grafana only waits for the secrets job to start", "docker-compose.yml", "      secrets:\n        condition: service_completed_successfully\n      prometheus:", "      secrets:\n        condition: service_started\n      prometheus:", "grafana: reads secret files but does not depend on secrets with condition service_completed_successfully"},
		{"services mount the secrets writable", "docker-compose.yml", "    - secrets:/run/secrets:ro\n", "    - secrets:/run/secrets\n", "inventory-service: mounts the volume secrets writable"},
		{"postgres does not mount the secrets", "docker-compose.yml", "      - postgres:/var/lib/postgresql/data\n      - secrets:/run/secrets:ro\n", "      - postgres:/var/lib/postgresql/data\n", "postgres: reads secret files but does not mount the volume secrets"},
		{"a secret file outside the volume", "docker-compose.yml", "DATABASE_PASSWORD_FILE: /run/secrets/postgres_password", "DATABASE_PASSWORD_FILE: /etc/postgres_password", `notification-service: DATABASE_PASSWORD_FILE="/etc/postgres_password" is not a file of the volume secrets`},
		{"services and postgres read other passwords", "docker-compose.yml", "DATABASE_PASSWORD_FILE: /run/secrets/postgres_password", "DATABASE_PASSWORD_FILE: /run/secrets/database_password", `order-service: DATABASE_PASSWORD_FILE="/run/secrets/database_password", but postgres's POSTGRES_PASSWORD_FILE is "/run/secrets/postgres_password"`},
		{"the secrets job misses a file", "docker-compose.yml", "        new admin_token 65532:65532\n", "", "secrets: does not generate admin_token, which"},
		{"the secrets job has a network", "docker-compose.yml", "    network_mode: none\n", "", `secrets: network_mode ""`},
		{"the secrets job restarts", "docker-compose.yml", "    restart: \"no\"\n    volumes:\n      - secrets:/run/secrets\n", "    restart: unless-stopped\n    volumes:\n      - secrets:/run/secrets\n", `secrets: restart "unless-stopped"`},
		{"the secrets job cannot write", "docker-compose.yml", "      - secrets:/run/secrets\n    entrypoint", "      - secrets:/run/secrets:ro\n    entrypoint", "secrets: does not mount the volume secrets writable"},
		{".env enters the build context", ".dockerignore", ".env\n", "", ".dockerignore: .env is not ignored"},
		{"the Dockerfile takes a secret argument", "Dockerfile", "ARG SERVICE\nARG PACKAGE", "ARG SERVICE\nARG ADMIN_TOKEN\nARG PACKAGE", `"ARG ADMIN_TOKEN" would bake a secret`},
		{"the Dockerfile copies .env", "Dockerfile", "COPY . .\n", "COPY . .\nCOPY .env /src/.env\n", `"COPY .env /src/.env" would bake a secret`},
		{"config map writes a secret", "configmap.yaml", "  LOG_LEVEL: info", "  LOG_LEVEL: info\n  CALLBACK_SECRET: dev-callback-secret", "CALLBACK_SECRET is written in the file"},
		{"deployment writes a secret", "order-service.yaml", "            - name: DB_NAME\n", "            - name: ADMIN_TOKEN\n              value: dev-admin-token\n            - name: DB_NAME\n", "ADMIN_TOKEN is written in the file"},
		{"base ships a secret", "configmap.yaml", "kind: ConfigMap", "kind: Secret", "deploy/base ships Secret fulfillment-config"},
		{"the service schedules runs beside the CronJob", "reconciliation-service.yaml", "value: \"0s\"", "value: \"5m\"",
			"2 schedulers of reconciliation runs [Deployment reconciliation-service (RECONCILIATION_INTERVAL=\"5m\") CronJob reconciliation-run]"},
		{"the service schedules by default beside the CronJob", "reconciliation-service.yaml", "            - name: RECONCILIATION_INTERVAL\n              value: \"0s\"\n", "",
			"2 schedulers of reconciliation runs"},
		{"nothing schedules runs", "reconciliation-cronjob.yaml", "runs=http://reconciliation-service:8086/admin/reconciliation/runs", "runs=http://reconciliation-service:8086/admin/other",
			"0 schedulers of reconciliation runs"},
		{"resource not listed", "kustomization.yaml", "  - points-service.yaml\n", "", "points-service.yaml is not listed"},
		{"prometheus scrapes a wrong port", "prometheus.yml", "points-service:8084", "points-service:8083", "points-service scraped on port 8083"},
		{"init.sql misses a database", "init.sql", "CREATE DATABASE points;", "", "does not create points"},
		{"Makefile misses a module", "Makefile", " examples/shipping", "", "MODULES lacks examples/shipping, a module of go.work"},
		{"go.work misses a module", "go.work", "\t./examples/shipping\n", "", "MODULES lists examples/shipping, which go.work does not use"},
		{"Makefile misses a service", "Makefile", "SERVICES := order payment inventory points notification", "SERVICES := order payment inventory points", "Makefile: SERVICES is"},
		{"compose does not mount the alert rules", "docker-compose.yml", "      - ./deploy/prometheus/alerts.yml:/etc/prometheus/alerts.yml:ro\n", "", "prometheus: /etc/prometheus/alerts.yml is not mounted"},
		{"prometheus reads its configuration elsewhere", "docker-compose.yml", "--config.file=/etc/prometheus/prometheus.yml", "--config.file=/etc/prometheus/main.yml", "prometheus: /etc/prometheus/main.yml is not mounted"},
		{"prometheus names a rule file compose does not mount", "prometheus.yml", "  - alerts.yml", "  - rules/alerts.yml", "/etc/prometheus/rules/alerts.yml is not mounted"},
		{"grafana provisioning mounted from elsewhere", "docker-compose.yml", "./deploy/grafana/provisioning:", "./deploy/provisioning:", "grafana: /etc/grafana/provisioning is mounted from ./deploy/provisioning, want ./deploy/grafana/provisioning"},
		{"grafana loads dashboards from an unmounted path", "grafana/provisioning/dashboards/fulfillment.yml", "path: /var/lib/grafana/dashboards", "path: /var/lib/grafana/boards", "loads /var/lib/grafana/boards, which compose does not mount"},
		{"grafana's home dashboard is missing", "docker-compose.yml", "dashboards/fulfillment.json", "dashboards/missing.json", "home dashboard /var/lib/grafana/dashboards/missing.json is no file"},
		{"the datasource points at no compose service", "grafana/provisioning/datasources/prometheus.yml", "url: http://prometheus:9090", "url: http://prom:9090", "no compose service prom"},
		{"the datasource points at a wrong port", "grafana/provisioning/datasources/prometheus.yml", "url: http://prometheus:9090", "url: http://prometheus:9091", "compose service prometheus has no port 9091"},
		{"a panel uses a datasource that is not provisioned", "grafana/dashboards/fulfillment.json", `"uid": "prometheus"`, `"uid": "prom"`, `uses datasource uid "prom", which is not provisioned`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := loadRepo(t)
			target := map[string]*[]byte{
				"docker-compose.yml": &r.compose, "init.sql": &r.initSQL, "prometheus.yml": &r.prometheus, "Makefile": &r.makefile, "go.work": &r.goWork,
				".dockerignore": &r.dockerignore, "Dockerfile": &r.dockerfile,
			}[tt.file]
			if name, ok := strings.CutPrefix(tt.file, "grafana/"); ok {
				f, ok := r.grafana[name]
				if !ok {
					t.Fatalf("no deploy/grafana/%s", name)
				}
				target = &f.Data
			}
			if target == nil {
				f, ok := r.base[tt.file]
				if !ok {
					t.Fatalf("no deploy/base/%s", tt.file)
				}
				target = &f.Data
			}
			if !strings.Contains(string(*target), tt.old) {
				t.Fatalf("%s does not contain %q: update the test", tt.file, tt.old)
			}
			*target = []byte(strings.Replace(string(*target), tt.old, tt.new, 1))
			errs := r.check(suite.Services())
			for _, err := range errs {
				if strings.Contains(err.Error(), tt.want) {
					return
				}
			}
			t.Errorf("no error says %q; got %v", tt.want, errs)
		})
	}
}

// TestChecksCatchATableChange changes the runner's table instead of a file.
func TestChecksCatchATableChange(t *testing.T) {
	tests := []struct {
		name   string
		modify func([]suite.Service)
		want   []string
	}{
		{"port", func(s []suite.Service) { s[2].Port = 9083 }, []string{
			"docker-compose.yml: inventory-service: port 9083 is not published",
			"Deployment inventory-service: container ports",
			"Service inventory-service does not expose port 9083",
			"inventory-service scraped on port 8083, want 9083",
		}},
		{"database", func(s []suite.Service) { s[4].DBName = "notes" }, []string{
			`docker-compose.yml: notification-service: DB_NAME="notifications", want "notes"`,
			`Deployment notification-service: DB_NAME="notifications", want "notes"`,
			"init.sql: does not create notes",
		}},
		{"a sixth service", func(s []suite.Service) { s[0] = suite.Service{Name: "shipping", Port: 8086, DBName: "shipping"} }, []string{
			"docker-compose.yml: shipping-service: no such service",
			"no Deployment shipping-service",
			"MODULES lacks services/shipping",
		}},
	}
	r := loadRepo(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			services := suite.Services()
			tt.modify(services)
			var all strings.Builder
			for _, err := range r.check(services) {
				all.WriteString(err.Error() + "\n")
			}
			for _, want := range tt.want {
				if !strings.Contains(all.String(), want) {
					t.Errorf("no error says %q; got:\n%s", want, all.String())
				}
			}
		})
	}
}

func TestDocumentedEnv(t *testing.T) {
	tests := []struct {
		name    string
		md      string
		want    []string
		wantErr bool
	}{
		{"table", "# x\n\n## Configuration\n\n| variable | default |\n|---|---|\n| `A_B` | 1 |\n| `C` | `D_E` |\n", []string{"A_B", "C"}, false},
		{"prose is ignored", "## Configuration\nDATABASE_URL is set.\n| `X` |\n", []string{"X"}, false},
		{"other sections are ignored", "## Lifecycle\n| CREATED | 1 |\n## Configuration\n| `X` |\n## API\n| GET |\n", []string{"X"}, false},
		{"no table", "# nothing here\n", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := deployconsistency.DocumentedEnv([]byte(tt.md))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for _, name := range tt.want {
				if !got[name] {
					t.Errorf("%s missing from %v", name, got)
				}
			}
		})
	}
}

// TestComposeForms reads the other spellings compose allows.
func TestComposeForms(t *testing.T) {
	one := []suite.Service{{Name: "order", Port: 8081, DBName: "orders", URLEnv: "ORDER_URL"}}
	documented := map[string]bool{"HTTP_ADDR": true, "DB_NAME": true, "ORDER_URL": true}
	tests := []struct {
		name    string
		compose string
		want    string // substring of an error; empty: no error
	}{
		{"list environment, long ports, list args", `
services:
  order-service:
    image: fulfillment/order-service:1.2
    build: {context: ., args: ["SERVICE=order"]}
    environment: ["HTTP_ADDR=:8081", "DB_NAME=orders", "ORDER_URL=http://order-service:8081"]
    ports: [{target: 8081, published: 8081}]
`, ""},
		{"host ip and protocol in a port", `
services:
  order-service:
    image: fulfillment/order-service
    build: {args: {SERVICE: order}}
    environment: {HTTP_ADDR: ":8081", DB_NAME: orders}
    ports: ["127.0.0.1:8081:8081/tcp"]
`, ""},
		{"port only inside the network", `
services:
  order-service:
    image: fulfillment/order-service
    build: {args: {SERVICE: order}}
    environment: {HTTP_ADDR: ":8081", DB_NAME: orders}
    ports: ["18081:8081"]
`, "port 8081 is not published as 8081:8081"},
		{"missing DB_NAME", `
services:
  order-service:
    image: fulfillment/order-service
    build: {args: {SERVICE: order}}
    environment: {HTTP_ADDR: ":8081"}
    ports: ["8081:8081"]
`, "DB_NAME is not set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := deployconsistency.CheckCompose([]byte(tt.compose), one, documented)
			if tt.want == "" {
				for _, err := range errs {
					t.Error(err)
				}
				return
			}
			for _, err := range errs {
				if strings.Contains(err.Error(), tt.want) {
					return
				}
			}
			t.Errorf("no error says %q; got %v", tt.want, errs)
		})
	}
}

// TestPortsTableCatchesDrift changes the README's ports table, compose's
// published ports or the runner's service table one at a time and expects
// the ports check to name what no longer agrees.
func TestPortsTableCatchesDrift(t *testing.T) {
	tests := []struct {
		name     string
		readme   func(string) string
		compose  func(string) string
		services func([]suite.Service)
		want     string
	}{
		{name: "a compose port in the table",
			readme: func(s string) string {
				return strings.Replace(s, "| `grafana` | Grafana, the Fulfillment dashboard (anonymous, read-only) | — | 3000 |", "| `grafana` | Grafana | — | 3001 |", 1)
			},
			want: "`grafana` under compose is 3001, but docker-compose.yml publishes 3000"},
		{name: "a row missing",
			readme: func(s string) string { return regexp.MustCompile("(?m)^\\| `prometheus` .*\n").ReplaceAllString(s, "") },
			want:   "no row `prometheus` (make run: none (—), compose: 9090)"},
		{name: "a port compose publishes elsewhere",
			compose: func(s string) string { return strings.Replace(s, `"127.0.0.1:8080:8080"`, `"127.0.0.1:18080:8080"`, 1) },
			want:    "`redpanda-console` under compose is 8080, but docker-compose.yml publishes 18080"},
		{name: "a service's port in the runner",
			services: func(s []suite.Service) { s[2].Port = 9083 },
			want:     "`inventory-service` under make run is 8083, but the runner uses 9083"},
		{name: "a port nothing opens",
			readme: func(s string) string {
				return strings.Replace(s, "| `grafana` |", "| `zipkin` | Zipkin | — | 9411 |\n| `grafana` |", 1)
			},
			want: "`zipkin` under compose is 9411, but docker-compose.yml publishes none (—)"},
		{name: "no table",
			readme: func(s string) string {
				return strings.Replace(s, deployconsistency.PortsHeading+"\n", "## Ports, elsewhere\n", 1)
			},
			want: "README: no ports table under \"## Ports\""},
	}
	r := loadRepo(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rr := r
			services := suite.Services()
			if tt.readme != nil {
				rr.readme = []byte(tt.readme(string(r.readme)))
				if string(rr.readme) == string(r.readme) {
					t.Fatal("the README change matched nothing")
				}
			}
			if tt.compose != nil {
				rr.compose = []byte(tt.compose(string(r.compose)))
				if string(rr.compose) == string(r.compose) {
					t.Fatal("the compose change matched nothing")
				}
			}
			if tt.services != nil {
				tt.services(services)
			}
			p, err := deployconsistency.LoadCompose(context.Background(), rr.compose)
			if err != nil {
				t.Fatal(err)
			}
			var all strings.Builder
			for _, err := range rr.checkPorts(services, deployconsistency.PublishedPorts(p)) {
				all.WriteString(err.Error() + "\n")
			}
			if !strings.Contains(all.String(), tt.want) {
				t.Errorf("no error says %q; got:\n%s", tt.want, all.String())
			}
		})
	}
}

// TestPortsTable reads the cells' spellings.
func TestPortsTable(t *testing.T) {
	md := "## Ports\n\n| name | what | `make run` | `docker compose` |\n|---|---|---|---|\n" +
		"| `a-service` | A | 8081 | 8081 (same) |\n| `b` | B | — | 15432 (user postgres) |\n| `c` | C | 9092 (the embedded broker) | — |\n" +
		"## Next\n| `d` | D | 1 | 2 |\n"
	got, err := deployconsistency.PortsTable([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]deployconsistency.Ports{"a-service": {Run: 8081, Compose: 8081}, "b": {Compose: 15432}, "c": {Run: 9092}}
	if !maps.Equal(got, want) {
		t.Errorf("PortsTable = %v, want %v", got, want)
	}
	if _, err := deployconsistency.PortsTable([]byte("## Ports\n| `a` | A | soon | — |\n")); err == nil || !strings.Contains(err.Error(), `"soon": want a port`) {
		t.Errorf("a cell without a port: %v, want an error naming it", err)
	}
}
