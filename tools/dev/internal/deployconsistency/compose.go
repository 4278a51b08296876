package deployconsistency

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// SecretsService is the one-shot compose service that generates the
// secrets into SecretsVolume on the first start (docs/security.md).
const SecretsService = "secrets"

// SecretsVolume is the named volume holding the generated secrets, one file
// each.
const SecretsVolume = "secrets"

// PublishHost is the only host address compose may publish a port on: what
// the suite serves on the host (Redpanda Console and Prometheus without a
// login, Postgres) is for this machine.
const PublishHost = "127.0.0.1"

// LoadCompose loads compose with compose's own loader as `docker compose
// up` does on a fresh clone: in a new directory holding only the file, so
// there is no .env, and with an empty environment, so nothing a developer
// exported helps. Interpolation, normalisation and the consistency checks
// (undefined volumes, dependencies on unknown services) are compose's.
func LoadCompose(ctx context.Context, compose []byte) (*types.Project, error) {
	dir, err := os.MkdirTemp("", "compose-fresh-clone-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "docker-compose.yml")
	if err := os.WriteFile(file, compose, 0o600); err != nil {
		return nil, err
	}
	opts, err := cli.NewProjectOptions([]string{file},
		cli.WithWorkingDirectory(dir),
		cli.WithEnvFiles(), // the default .env, of which a fresh clone has none
		cli.WithDotEnv,
	)
	if err != nil {
		return nil, err
	}
	p, err := opts.LoadProject(ctx)
	if err != nil {
		return nil, fmt.Errorf("docker-compose.yml does not load on a fresh clone (no .env, no environment): %w", err)
	}
	return p, nil
}

// secretName matches the variables that hold a secret: a password, a
// secret or a token, whoever reads them.
var secretName = regexp.MustCompile(`PASSWORD|SECRET|TOKEN`)

// secretFileVar reports whether name is the *_FILE form of a secret
// variable: ADMIN_TOKEN_FILE, POSTGRES_PASSWORD_FILE, and Grafana's
// GF_SECURITY_ADMIN_PASSWORD__FILE.
func secretFileVar(name string) bool {
	base, ok := strings.CutSuffix(name, "_FILE")
	return ok && secretName.MatchString(strings.TrimSuffix(base, "_"))
}

// RequiredSecretFiles are the *_FILE variables each compose service needs:
// every suite service its admin token and database password, Postgres its
// password, and Grafana its admin's, without which it keeps admin/admin.
func RequiredSecretFiles(services []suite.Service) map[string][]string {
	need := map[string][]string{
		"postgres": {"POSTGRES_PASSWORD_FILE"},
		"grafana":  {"GF_SECURITY_ADMIN_PASSWORD__FILE"},
	}
	for _, s := range services {
		need[s.FullName()] = []string{"ADMIN_TOKEN_FILE", "DATABASE_PASSWORD_FILE"}
	}
	return need
}

// CheckComposeProject checks the loaded compose project (LoadCompose)
// against the rules of docs/security.md: every port published on
// PublishHost; no secret in any service's environment, only *_FILE
// variables naming files of SecretsVolume; every service reading such a
// file waits for SecretsService to complete and mounts the volume
// read-only; SecretsService writes every file a service reads; the
// services' database password is Postgres's.
func CheckComposeProject(p *types.Project, services []suite.Service) []error {
	var errs []error
	errs = append(errs, checkPorts(p)...)
	errs = append(errs, checkSecretEnv(p, services)...)
	errs = append(errs, checkSecretsService(p)...)
	return errs
}

func checkPorts(p *types.Project) []error {
	var errs []error
	for _, name := range sortedKeys(p.Services) {
		for _, port := range p.Services[name].Ports {
			if port.HostIP == PublishHost {
				continue
			}
			host := port.HostIP
			if host == "" {
				host = "every interface"
			}
			errs = append(errs, fmt.Errorf("docker-compose.yml: %s: port %d is published on %s; want %s:%s:%d",
				name, port.Target, host, PublishHost, port.Published, port.Target))
		}
	}
	return errs
}

func checkSecretEnv(p *types.Project, services []suite.Service) []error {
	var errs []error
	required := RequiredSecretFiles(services)
	for _, name := range sortedKeys(p.Services) {
		svc := p.Services[name]
		where := "docker-compose.yml: " + name
		var files []string
		for _, key := range sortedKeys(svc.Environment) {
			value := ""
			if v := svc.Environment[key]; v != nil {
				value = *v
			}
			switch {
			case secretFileVar(key):
				files = append(files, key)
			case secretName.MatchString(key):
				suffix := "_FILE"
				if strings.HasPrefix(key, "GF_") {
					suffix = "__FILE" // Grafana's spelling
				}
				errs = append(errs, fmt.Errorf("%s: %s is set in the environment; give the service %s%s, a file of the volume %s (docs/security.md)",
					where, key, key, suffix, SecretsVolume))
			case key == "DATABASE_URL":
				if u, err := url.Parse(value); err == nil {
					if _, ok := u.User.Password(); ok {
						errs = append(errs, fmt.Errorf("%s: DATABASE_URL holds a password; give the service DATABASE_PASSWORD_FILE (docs/security.md)", where))
					}
				}
			}
		}
		for _, key := range required[name] {
			if !slices.Contains(files, key) {
				errs = append(errs, fmt.Errorf("%s: %s is not set; the service needs its secret from the volume %s", where, key, SecretsVolume))
			}
		}
		if len(files) > 0 {
			errs = append(errs, checkReadsSecrets(where, svc, files)...)
		}
	}
	errs = append(errs, checkSamePassword(p, services)...)
	return errs
}

// checkReadsSecrets checks a service that reads the secret files files.
func checkReadsSecrets(where string, svc types.ServiceConfig, files []string) []error {
	var errs []error
	if dep, ok := svc.DependsOn[SecretsService]; !ok || dep.Condition != types.ServiceConditionCompletedSuccessfully {
		errs = append(errs, fmt.Errorf("%s: reads secret files but does not depend on %s with condition %s",
			where, SecretsService, types.ServiceConditionCompletedSuccessfully))
	}
	mount, ok := secretsMount(svc)
	switch {
	case !ok:
		errs = append(errs, fmt.Errorf("%s: reads secret files but does not mount the volume %s", where, SecretsVolume))
	case !mount.ReadOnly:
		errs = append(errs, fmt.Errorf("%s: mounts the volume %s writable; want read-only (:ro)", where, SecretsVolume))
	}
	for _, key := range files {
		file := *svc.Environment[key]
		if ok && path.Dir(path.Clean(file)) != path.Clean(mount.Target) {
			errs = append(errs, fmt.Errorf("%s: %s=%q is not a file of the volume %s, mounted at %s", where, key, file, SecretsVolume, mount.Target))
		}
	}
	return errs
}

// secretsMount is svc's mount of SecretsVolume.
func secretsMount(svc types.ServiceConfig) (types.ServiceVolumeConfig, bool) {
	for _, v := range svc.Volumes {
		if v.Type == types.VolumeTypeVolume && v.Source == SecretsVolume {
			return v, true
		}
	}
	return types.ServiceVolumeConfig{}, false
}

// checkSamePassword checks that the suite services read Postgres's own
// password file.
func checkSamePassword(p *types.Project, services []suite.Service) []error {
	pg, ok := p.Services["postgres"]
	if !ok || pg.Environment["POSTGRES_PASSWORD_FILE"] == nil {
		return nil // reported above
	}
	want := *pg.Environment["POSTGRES_PASSWORD_FILE"]
	var errs []error
	for _, s := range services {
		svc, ok := p.Services[s.FullName()]
		if !ok {
			continue
		}
		if got := svc.Environment["DATABASE_PASSWORD_FILE"]; got != nil && *got != want {
			errs = append(errs, fmt.Errorf("docker-compose.yml: %s: DATABASE_PASSWORD_FILE=%q, but postgres's POSTGRES_PASSWORD_FILE is %q", s.FullName(), *got, want))
		}
	}
	return errs
}

// checkSecretsService checks the one-shot service: it runs to completion
// once per start, without a network, writes into the volume, and creates
// every file a service reads.
func checkSecretsService(p *types.Project) []error {
	svc, ok := p.Services[SecretsService]
	if !ok {
		return []error{fmt.Errorf("docker-compose.yml: no service %s generates the secrets", SecretsService)}
	}
	where := "docker-compose.yml: " + SecretsService
	var errs []error
	if mount, ok := secretsMount(svc); !ok || mount.ReadOnly {
		errs = append(errs, fmt.Errorf("%s: does not mount the volume %s writable", where, SecretsVolume))
	}
	if svc.Restart != "" && svc.Restart != types.RestartPolicyNo {
		errs = append(errs, fmt.Errorf("%s: restart %q; a one-shot service restarts \"no\"", where, svc.Restart))
	}
	if svc.NetworkMode != "none" {
		errs = append(errs, fmt.Errorf("%s: network_mode %q; it needs no network, want \"none\"", where, svc.NetworkMode))
	}
	if len(svc.Ports) > 0 {
		errs = append(errs, fmt.Errorf("%s: publishes ports", where))
	}
	script := strings.Join(append(slices.Clone(svc.Entrypoint), svc.Command...), "\n")
	written := map[string]bool{}
	for _, name := range sortedKeys(p.Services) {
		other := p.Services[name]
		for _, key := range sortedKeys(other.Environment) {
			if !secretFileVar(key) || other.Environment[key] == nil {
				continue
			}
			file := path.Base(*other.Environment[key])
			if written[file] {
				continue
			}
			written[file] = true
			if !regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(file) + `(\s|$)`).MatchString(script) {
				errs = append(errs, fmt.Errorf("%s: does not generate %s, which %s reads (%s)", where, file, name, key))
			}
		}
	}
	return errs
}

// CheckDockerignore checks that no .env, which may hold secrets, enters a
// build context.
func CheckDockerignore(dockerignore []byte) []error {
	sc := bufio.NewScanner(bytes.NewReader(dockerignore))
	for sc.Scan() {
		if line := strings.TrimSpace(sc.Text()); line == ".env" || line == "/.env" {
			return nil
		}
	}
	return []error{fmt.Errorf(".dockerignore: .env is not ignored, so its secrets enter the build context")}
}

// dockerfileSecret matches an ARG or ENV instruction of a secret variable,
// or a COPY or ADD of a .env file.
var dockerfileSecret = regexp.MustCompile(`(?im)^\s*((?:ARG|ENV)\s+\S*(?:PASSWORD|SECRET|TOKEN)\S*|(?:COPY|ADD)\s.*\.env\b.*)$`)

// CheckDockerfile checks that the Dockerfile bakes no secret into an image:
// no secret build argument or environment variable, no .env copied.
func CheckDockerfile(dockerfile []byte) []error {
	var errs []error
	for _, m := range dockerfileSecret.FindAllSubmatch(dockerfile, -1) {
		errs = append(errs, fmt.Errorf("Dockerfile: %q would bake a secret into the image; services read theirs at run time (*_FILE)", strings.TrimSpace(string(m[1]))))
	}
	return errs
}

// FaultProxyService is the compose service of the Kafka fault proxy
// (scripts/faultproxy) that `make compose-control` arms for loss/lost-ack.
const FaultProxyService = "faultproxy"

// ProducerService is the suite service whose producer the lost-ack drill
// faults: the order service's outbox relay.
const ProducerService = "order-service"

// CheckFaultProxy checks the wiring the lost-ack drill needs under compose:
// the fault proxy forwards to a listener of the broker service that
// advertises the proxy's own address, so a client that bootstraps through
// it stays on it; the order service bootstraps through the proxy and waits
// for it; the proxy's admin API is published on adminPort, where `make
// compose-control` asks for it.
func CheckFaultProxy(p *types.Project, brokerService string, adminPort int) []error {
	where := "docker-compose.yml: " + FaultProxyService
	proxy, ok := p.Services[FaultProxyService]
	if !ok {
		return []error{fmt.Errorf("docker-compose.yml: no service %s: loss/lost-ack cannot lose an acknowledgement under compose", FaultProxyService)}
	}
	env := func(svc types.ServiceConfig, key string) string {
		if v := svc.Environment[key]; v != nil {
			return *v
		}
		return ""
	}
	var errs []error
	listen, upstream := env(proxy, "FAULTPROXY_LISTEN"), env(proxy, "FAULTPROXY_UPSTREAM")
	_, listenPort, err := net.SplitHostPort(listen)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: FAULTPROXY_LISTEN=%q: %w", where, listen, err))
	}
	proxyAddr := net.JoinHostPort(FaultProxyService, listenPort)

	// The broker's listener the proxy forwards to, by port, and what it
	// advertises.
	broker, ok := p.Services[brokerService]
	if !ok {
		return append(errs, fmt.Errorf("docker-compose.yml: no broker service %s", brokerService))
	}
	upHost, upPort, err := net.SplitHostPort(upstream)
	switch {
	case err != nil:
		errs = append(errs, fmt.Errorf("%s: FAULTPROXY_UPSTREAM=%q: %w", where, upstream, err))
	case upHost != brokerService:
		errs = append(errs, fmt.Errorf("%s: FAULTPROXY_UPSTREAM=%q is not the broker service %s", where, upstream, brokerService))
	default:
		listeners, advertised := brokerListeners(broker.Command)
		name, found := "", false
		for n, addr := range listeners {
			if _, port, _ := net.SplitHostPort(addr); port == upPort {
				name, found = n, true
			}
		}
		switch {
		case !found:
			errs = append(errs, fmt.Errorf("docker-compose.yml: %s: no --kafka-addr listener on port %s, FAULTPROXY_UPSTREAM's", brokerService, upPort))
		case advertised[name] != proxyAddr:
			errs = append(errs, fmt.Errorf("docker-compose.yml: %s: the listener %s the proxy forwards to advertises %q, want the proxy's %q (clients would leave the proxy after Metadata)",
				brokerService, name, advertised[name], proxyAddr))
		}
	}
	if dep, ok := proxy.DependsOn[brokerService]; !ok || dep.Condition != types.ServiceConditionHealthy {
		errs = append(errs, fmt.Errorf("%s: does not wait for %s to be healthy", where, brokerService))
	}

	producer, ok := p.Services[ProducerService]
	if !ok {
		return append(errs, fmt.Errorf("docker-compose.yml: no service %s", ProducerService))
	}
	if got := env(producer, "KAFKA_BROKERS"); got != proxyAddr {
		errs = append(errs, fmt.Errorf("docker-compose.yml: %s: KAFKA_BROKERS=%q, want the fault proxy %q (loss/lost-ack faults its relay's producer)", ProducerService, got, proxyAddr))
	}
	if dep, ok := producer.DependsOn[FaultProxyService]; !ok || dep.Condition != types.ServiceConditionHealthy {
		errs = append(errs, fmt.Errorf("docker-compose.yml: %s: does not wait for %s to be healthy", ProducerService, FaultProxyService))
	}

	published := false
	for _, port := range proxy.Ports {
		if port.Published == strconv.Itoa(adminPort) && port.Target == uint32(adminPort) {
			published = true
		}
	}
	if _, adminListen, _ := net.SplitHostPort(env(proxy, "FAULTPROXY_ADMIN_ADDR")); !published || adminListen != strconv.Itoa(adminPort) {
		errs = append(errs, fmt.Errorf("%s: its admin API (FAULTPROXY_ADMIN_ADDR %q) is not published as %d:%d, where make compose-control asks for it",
			where, env(proxy, "FAULTPROXY_ADMIN_ADDR"), adminPort, adminPort))
	}
	return errs
}

// brokerListeners reads Redpanda's --kafka-addr and --advertise-kafka-addr
// (name://host:port, comma-separated) into name → address.
func brokerListeners(command []string) (listen, advertise map[string]string) {
	listen, advertise = map[string]string{}, map[string]string{}
	for _, arg := range command {
		flag, value, ok := strings.Cut(arg, "=")
		if !ok {
			continue
		}
		var into map[string]string
		switch flag {
		case "--kafka-addr":
			into = listen
		case "--advertise-kafka-addr":
			into = advertise
		default:
			continue
		}
		for _, l := range strings.Split(value, ",") {
			if name, addr, ok := strings.Cut(l, "://"); ok {
				into[name] = addr
			}
		}
	}
	return listen, advertise
}
