// Package deployconsistency checks that every way of running the suite
// agrees with the runner's service table (suite.Services): docker-compose.yml,
// the kustomize base under deploy/base, deploy/prometheus/prometheus.yml,
// deploy/postgres/init.sql and the Makefile. It also checks that every
// environment variable they (and the runner) give a service is one of those
// documented in README.md (Configuration).
//
// LoadCompose loads docker-compose.yml with compose's own loader as a fresh
// clone would (no .env, no environment), and CheckComposeProject checks the
// result: ports on 127.0.0.1 only, secrets only as files of the volume the
// one-shot service secrets fills. CheckDockerignore and CheckDockerfile keep
// secrets out of the build context and the images.
//
// CheckMonitoring checks compose's Prometheus and Grafana against the files
// under deploy/prometheus and deploy/grafana, and PromtoolChecks are the
// promtool runs (rules, configuration, the alerts' unit tests) its tests
// make.
//
// Render builds a kustomization (deploy/base, deploy/overlays/dev) with
// kustomize's API and decodes every object strictly into its Kubernetes API
// type; CheckPodSecurity, CheckWorkloads, CheckTopicsJob,
// CheckScrapeAnnotations and CheckKubernetesPrometheus check what a cluster
// would be given, without one.
//
// Each Check function returns every disagreement it finds, so one run lists
// them all.
package deployconsistency

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// ImagePrefix is the repository part of every service image name.
const ImagePrefix = "fulfillment/"

// ConfigurationHeading opens the README section whose table lists every
// environment variable.
const ConfigurationHeading = "## Configuration"

// DocumentedEnv returns the variable names in the first column of the
// markdown table under the README's ConfigurationHeading (up to the next
// "## " heading; the README's other tables are not configuration).
func DocumentedEnv(markdown []byte) (map[string]bool, error) {
	envName := regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	names := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(markdown))
	inSection := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "## ") {
			inSection = line == ConfigurationHeading
			continue
		}
		if !inSection || !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 2 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if envName.MatchString(name) {
			names[name] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read configuration table: %w", err)
	}
	if len(names) == 0 {
		return nil, errors.New("no variables found in the configuration table")
	}
	return names, nil
}

// URLOf is the address under which other containers reach s, in compose and
// in Kubernetes alike.
func URLOf(s suite.Service) string {
	return "http://" + s.FullName() + ":" + strconv.Itoa(s.Port)
}

// CheckEnv checks the environment one service is given in some mode (where).
// It reports undocumented names and per-service values that disagree with
// the table; missing per-service values are reported only when required.
// listen is the HTTP_ADDR the mode gives s.
func CheckEnv(where string, env map[string]string, s suite.Service, all []suite.Service, documented map[string]bool, listen string, urlOf func(suite.Service) string) []error {
	var errs []error
	for _, name := range sortedKeys(env) {
		if !documented[name] {
			errs = append(errs, fmt.Errorf("%s: %s is not a variable of README.md (Configuration)", where, name))
		}
	}
	want := map[string]string{"HTTP_ADDR": listen, "DB_NAME": s.DBName}
	for _, name := range []string{"HTTP_ADDR", "DB_NAME"} {
		got, ok := env[name]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: %s is not set (want %q)", where, name, want[name]))
		} else if got != want[name] {
			errs = append(errs, fmt.Errorf("%s: %s=%q, want %q", where, name, got, want[name]))
		}
	}
	if got, ok := env["CONSUMER_GROUP"]; ok && got != s.ConsumerGroup {
		errs = append(errs, fmt.Errorf("%s: CONSUMER_GROUP=%q, want %q", where, got, s.ConsumerGroup))
	}
	for _, other := range all {
		if got, ok := env[other.URLEnv]; ok && other.URLEnv != "" && got != urlOf(other) {
			errs = append(errs, fmt.Errorf("%s: %s=%q, want %q", where, other.URLEnv, got, urlOf(other)))
		}
	}
	return errs
}

// composeFile is the part of a compose file the checks read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string `yaml:"image"`
	Build       any    `yaml:"build"`
	Environment env    `yaml:"environment"`
	Ports       []any  `yaml:"ports"`
}

// env is a compose environment in either of its forms: a map or a list of
// NAME=value.
type env map[string]string

// UnmarshalYAML reads both forms (merge keys included).
func (e *env) UnmarshalYAML(node *yaml.Node) error {
	*e = env{}
	if node.Kind == yaml.SequenceNode {
		var list []string
		if err := node.Decode(&list); err != nil {
			return err
		}
		for _, kv := range list {
			name, value, _ := strings.Cut(kv, "=")
			(*e)[name] = value
		}
		return nil
	}
	var m map[string]any
	if err := node.Decode(&m); err != nil {
		return err
	}
	for name, value := range m {
		if value == nil {
			(*e)[name] = ""
		} else {
			(*e)[name] = fmt.Sprint(value)
		}
	}
	return nil
}

// CheckCompose checks a compose file against services.
func CheckCompose(compose []byte, services []suite.Service, documented map[string]bool) []error {
	var f composeFile
	if err := yaml.Unmarshal(compose, &f); err != nil {
		return []error{fmt.Errorf("docker-compose.yml: %w", err)}
	}
	var errs []error
	for _, s := range services {
		where := "docker-compose.yml: " + s.FullName()
		cs, ok := f.Services[s.FullName()]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no such service", where))
			continue
		}
		if want := ImagePrefix + s.FullName(); strings.Split(cs.Image, ":")[0] != want {
			errs = append(errs, fmt.Errorf("%s: image %q, want %q", where, cs.Image, want))
		}
		args := buildArgs(cs.Build)
		if args["SERVICE"] != s.Name {
			errs = append(errs, fmt.Errorf("%s: build arg SERVICE=%q, want %q", where, args["SERVICE"], s.Name))
		}
		if port, ok := args["PORT"]; ok && port != strconv.Itoa(s.Port) {
			errs = append(errs, fmt.Errorf("%s: build arg PORT=%q, want %d", where, port, s.Port))
		}
		published, err := composePorts(cs.Ports)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		if published[s.Port] != s.Port {
			errs = append(errs, fmt.Errorf("%s: port %d is not published as %d:%d (ports: %v)", where, s.Port, s.Port, s.Port, cs.Ports))
		}
		errs = append(errs, CheckEnv(where, cs.Environment, s, services, documented, s.HTTPAddr(), URLOf)...)
		errs = append(errs, CheckNoSecretValues(where, cs.Environment, true)...)
	}
	errs = append(errs, unknownServices("docker-compose.yml", sortedKeys(f.Services), services)...)
	return errs
}

// CheckComposeConsole checks compose's console (suite.ConsoleName): its
// image and build, its port published as make run's, its listen address,
// the services' URLs as the services are given them, every variable
// documented and no secret written.
func CheckComposeConsole(compose []byte, services []suite.Service, documented map[string]bool) []error {
	var f composeFile
	if err := yaml.Unmarshal(compose, &f); err != nil {
		return []error{fmt.Errorf("docker-compose.yml: %w", err)}
	}
	where := "docker-compose.yml: " + suite.ConsoleName
	cs, ok := f.Services[suite.ConsoleName]
	if !ok {
		return []error{fmt.Errorf("%s: no such service", where)}
	}
	var errs []error
	if want := ImagePrefix + suite.ConsoleName; strings.Split(cs.Image, ":")[0] != want {
		errs = append(errs, fmt.Errorf("%s: image %q, want %q", where, cs.Image, want))
	}
	args := buildArgs(cs.Build)
	if args["SERVICE"] != suite.ConsoleName || args["PORT"] != strconv.Itoa(suite.ConsolePort) {
		errs = append(errs, fmt.Errorf("%s: build args SERVICE=%q PORT=%q, want %q and %d", where, args["SERVICE"], args["PORT"], suite.ConsoleName, suite.ConsolePort))
	}
	published, err := composePorts(cs.Ports)
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", where, err))
	}
	if published[suite.ConsolePort] != suite.ConsolePort {
		errs = append(errs, fmt.Errorf("%s: port %d is not published as %d:%d (ports: %v)", where, suite.ConsolePort, suite.ConsolePort, suite.ConsolePort, cs.Ports))
	}
	if want := ":" + strconv.Itoa(suite.ConsolePort); cs.Environment["HTTP_ADDR"] != want {
		errs = append(errs, fmt.Errorf("%s: HTTP_ADDR=%q, want %q", where, cs.Environment["HTTP_ADDR"], want))
	}
	for _, name := range sortedKeys(cs.Environment) {
		if !documented[name] {
			errs = append(errs, fmt.Errorf("%s: %s is not a variable of README.md (Configuration)", where, name))
		}
	}
	for _, s := range services {
		if got := cs.Environment[s.URLEnv]; got != URLOf(s) {
			errs = append(errs, fmt.Errorf("%s: %s=%q, want %q", where, s.URLEnv, got, URLOf(s)))
		}
	}
	return append(errs, CheckNoSecretValues(where, cs.Environment, true)...)
}

// SecretVars are the variables whose values must never be written in the
// repository (docs/security.md): compose gives them as files of its secrets
// volume (*_FILE, CheckComposeProject), Kubernetes from a Secret the
// operator creates.
func SecretVars() []string {
	return []string{"CALLBACK_SECRET", "CALLBACK_SECRET_PREVIOUS", "ADMIN_TOKEN"}
}

// CheckNoSecretValues reports a secret variable env sets to a value
// written in the file, and development mode, which accepts published
// secrets. With interpolation (compose), "${NAME...}" is read from the
// environment or .env at start, not written, and passes.
func CheckNoSecretValues(where string, env map[string]string, interpolation bool) []error {
	var errs []error
	for _, name := range SecretVars() {
		v, ok := env[name]
		if !ok || (interpolation && strings.HasPrefix(v, "${"+name)) {
			continue
		}
		errs = append(errs, fmt.Errorf("%s: %s is written in the file; take it from outside the repository (docs/security.md)", where, name))
	}
	if strings.EqualFold(env["SUITE_MODE"], "development") {
		errs = append(errs, fmt.Errorf("%s: SUITE_MODE=development accepts published secrets; it is for make run and the tests only", where))
	}
	return errs
}

// topicCreate is compose's topic creation: `rpk topic create A B -p N`.
var topicCreate = regexp.MustCompile(`rpk topic create ((?:[\w.-]+ )+)-p (\d+)`)

// CheckTopics checks that compose creates both topics with the partition
// count the embedded broker of `make run` gives them (suite.Partitions), so
// a drill's figures mean the same in both modes.
func CheckTopics(compose []byte) []error {
	m := topicCreate.FindSubmatch(compose)
	if m == nil {
		return []error{errors.New("docker-compose.yml: no `rpk topic create ... -p N` creates the topics")}
	}
	var errs []error
	topics := strings.Fields(string(m[1]))
	for _, want := range []string{suite.OrderEventsTopic, suite.DLQTopic} {
		if !slices.Contains(topics, want) {
			errs = append(errs, fmt.Errorf("docker-compose.yml: rpk topic create does not create %s (creates %v)", want, topics))
		}
	}
	if n, _ := strconv.Atoi(string(m[2])); n != suite.Partitions {
		errs = append(errs, fmt.Errorf("docker-compose.yml: topics created with -p %d, want %d partitions (suite.Partitions, as make run)", n, suite.Partitions))
	}
	return errs
}

// buildArgs reads the args of a compose build section.
func buildArgs(build any) map[string]string {
	args := map[string]string{}
	m, ok := build.(map[string]any)
	if !ok {
		return args
	}
	switch a := m["args"].(type) {
	case map[string]any:
		for k, v := range a {
			args[k] = fmt.Sprint(v)
		}
	case []any:
		for _, kv := range a {
			k, v, _ := strings.Cut(fmt.Sprint(kv), "=")
			args[k] = v
		}
	}
	return args
}

// composePorts maps container ports to the host ports they are published on.
func composePorts(ports []any) (map[int]int, error) {
	published := map[int]int{}
	for _, p := range ports {
		switch p := p.(type) {
		case map[string]any:
			target, err1 := strconv.Atoi(fmt.Sprint(p["target"]))
			host, err2 := strconv.Atoi(fmt.Sprint(p["published"]))
			if err := errors.Join(err1, err2); err != nil {
				return published, fmt.Errorf("port %v: %w", p, err)
			}
			published[target] = host
		default:
			spec, _, _ := strings.Cut(fmt.Sprint(p), "/")
			parts := strings.Split(spec, ":")
			target, err := strconv.Atoi(parts[len(parts)-1])
			if err != nil {
				return published, fmt.Errorf("port %q: %w", spec, err)
			}
			host := target
			if len(parts) > 1 {
				if host, err = strconv.Atoi(parts[len(parts)-2]); err != nil {
					return published, fmt.Errorf("port %q: %w", spec, err)
				}
			}
			published[target] = host
		}
	}
	return published, nil
}

// unknownServices reports names that look like suite services
// ("…-service") but are not in the table.
func unknownServices(where string, names []string, services []suite.Service) []error {
	var errs []error
	for _, name := range names {
		if !strings.HasSuffix(name, "-service") {
			continue
		}
		if !slices.ContainsFunc(services, func(s suite.Service) bool { return s.FullName() == name }) {
			errs = append(errs, fmt.Errorf("%s: %s is not a service of the runner's table (scripts/suite)", where, name))
		}
	}
	return errs
}

// CheckInitSQL checks that the compose Postgres init script creates exactly
// the services' databases.
func CheckInitSQL(sql []byte, services []suite.Service) []error {
	created := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?i)CREATE\s+DATABASE\s+"?([A-Za-z0-9_]+)"?`).FindAllSubmatch(sql, -1) {
		created[string(m[1])] = true
	}
	var errs []error
	for _, s := range services {
		if !created[s.DBName] {
			errs = append(errs, fmt.Errorf("deploy/postgres/init.sql: does not create %s (DB_NAME of %s)", s.DBName, s.FullName()))
		}
		delete(created, s.DBName)
	}
	for _, name := range sortedKeys(created) {
		errs = append(errs, fmt.Errorf("deploy/postgres/init.sql: creates %s, which no service uses", name))
	}
	return errs
}

// CheckPrometheus checks that the scrape configuration has each service's
// FullName:Port as a target.
func CheckPrometheus(config []byte, services []suite.Service) []error {
	var cfg struct {
		ScrapeConfigs []struct {
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(config, &cfg); err != nil {
		return []error{fmt.Errorf("deploy/prometheus/prometheus.yml: %w", err)}
	}
	targets := map[string]string{} // host → port
	for _, sc := range cfg.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, t := range st.Targets {
				host, port, _ := strings.Cut(t, ":")
				targets[host] = port
			}
		}
	}
	var errs []error
	for _, s := range services {
		if port, ok := targets[s.FullName()]; !ok {
			errs = append(errs, fmt.Errorf("deploy/prometheus/prometheus.yml: %s is not scraped", s.FullName()))
		} else if port != strconv.Itoa(s.Port) {
			errs = append(errs, fmt.Errorf("deploy/prometheus/prometheus.yml: %s scraped on port %s, want %d", s.FullName(), port, s.Port))
		}
	}
	return errs
}

// CheckMakefile checks the Makefile's SERVICES and MODULES lists.
func CheckMakefile(makefile []byte, services []suite.Service) []error {
	lists := map[string][]string{}
	for _, m := range regexp.MustCompile(`(?m)^(SERVICES|MODULES)\s*[:?]?=\s*(.*)$`).FindAllSubmatch(makefile, -1) {
		lists[string(m[1])] = strings.Fields(string(m[2]))
	}
	var errs []error
	var names []string
	for _, s := range services {
		names = append(names, s.Name)
		if !slices.Contains(lists["MODULES"], "services/"+s.Name) {
			errs = append(errs, fmt.Errorf("Makefile: MODULES lacks services/%s", s.Name))
		}
	}
	got := slices.Clone(lists["SERVICES"])
	sort.Strings(got)
	sort.Strings(names)
	if !slices.Equal(got, names) {
		errs = append(errs, fmt.Errorf("Makefile: SERVICES is %v, want %v", lists["SERVICES"], names))
	}
	return errs
}

// CheckModules fails when go.work and the Makefile's MODULES disagree:
// make test, vet and bench run each module of MODULES, so a module of
// go.work missing from it would never be tested, and one not in go.work
// would not build with the others.
func CheckModules(goWork, makefile []byte) []error {
	var work []string
	for _, m := range regexp.MustCompile(`(?m)^\s*(?:use\s+)?\./(\S+)\s*$`).FindAllSubmatch(goWork, -1) {
		work = append(work, string(m[1]))
	}
	var modules []string
	if m := regexp.MustCompile(`(?m)^MODULES\s*[:?]?=\s*(.*)$`).FindSubmatch(makefile); m != nil {
		modules = strings.Fields(string(m[1]))
	}
	var errs []error
	for _, w := range work {
		if !slices.Contains(modules, w) {
			errs = append(errs, fmt.Errorf("Makefile: MODULES lacks %s, a module of go.work", w))
		}
	}
	for _, m := range modules {
		if !slices.Contains(work, m) {
			errs = append(errs, fmt.Errorf("Makefile: MODULES lists %s, which go.work does not use", m))
		}
	}
	return errs
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
