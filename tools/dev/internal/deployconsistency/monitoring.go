package deployconsistency

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Where the images read their configuration unless told otherwise.
const (
	prometheusDefaultConfig    = "/etc/prometheus/prometheus.yml"
	grafanaDefaultProvisioning = "/etc/grafana/provisioning"
)

// monitoringFile is the part of a compose file CheckMonitoring reads.
type monitoringFile struct {
	Services map[string]struct {
		Command     any   `yaml:"command"`
		Environment env   `yaml:"environment"`
		Volumes     []any `yaml:"volumes"`
		Ports       []any `yaml:"ports"`
	} `yaml:"services"`
}

// CheckMonitoring checks that compose runs Prometheus and Grafana on the
// files of deploy/, which no container of this machine can try: the
// `prometheus` service mounts deploy/prometheus/prometheus.yml where its
// --config.file says and every rule file the configuration names beside
// it; the `grafana` service mounts deploy/grafana/provisioning where
// Grafana reads provisioning, each dashboard provider's path and the home
// dashboard come from deploy/grafana, each datasource URL names a compose
// service on a port it has, and every panel of every provisioned dashboard
// uses a provisioned datasource. grafana holds deploy/grafana.
func CheckMonitoring(compose, prometheusConfig []byte, grafana fs.FS) []error {
	var f monitoringFile
	if err := yaml.Unmarshal(compose, &f); err != nil {
		return []error{fmt.Errorf("docker-compose.yml: %w", err)}
	}
	var errs []error
	prom, ok := f.Services["prometheus"]
	if !ok {
		errs = append(errs, fmt.Errorf("docker-compose.yml: no prometheus service"))
	} else {
		config := prometheusDefaultConfig
		for _, arg := range commandArgs(prom.Command) {
			if v, ok := strings.CutPrefix(arg, "--config.file="); ok {
				config = v
			}
		}
		mounts := bindMounts(prom.Volumes)
		errs = append(errs, checkMount("docker-compose.yml: prometheus", mounts, config, "deploy/prometheus/prometheus.yml")...)
		var cfg struct {
			RuleFiles []string `yaml:"rule_files"`
		}
		if err := yaml.Unmarshal(prometheusConfig, &cfg); err != nil {
			errs = append(errs, fmt.Errorf("deploy/prometheus/prometheus.yml: %w", err))
		}
		for _, rule := range cfg.RuleFiles {
			if path.IsAbs(rule) {
				errs = append(errs, fmt.Errorf("deploy/prometheus/prometheus.yml: rule file %s is absolute; name it relative to the configuration so every deployment finds it", rule))
				continue
			}
			errs = append(errs, checkMount("docker-compose.yml: prometheus", mounts, path.Join(path.Dir(config), rule), path.Join("deploy/prometheus", rule))...)
		}
	}
	gf, ok := f.Services["grafana"]
	if !ok {
		return append(errs, fmt.Errorf("docker-compose.yml: no grafana service"))
	}
	mounts := bindMounts(gf.Volumes)
	provisioning := grafanaDefaultProvisioning
	if p := gf.Environment["GF_PATHS_PROVISIONING"]; p != "" {
		provisioning = p
	}
	errs = append(errs, checkMount("docker-compose.yml: grafana", mounts, provisioning, "deploy/grafana/provisioning")...)
	uids, derrs := datasources(grafana, f)
	errs = append(errs, derrs...)
	dirs, perrs := providerDirs(grafana, mounts)
	errs = append(errs, perrs...)
	for _, dir := range dirs {
		errs = append(errs, checkDashboards(grafana, dir, uids)...)
	}
	if home := gf.Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != "" {
		src, ok := resolve(mounts, home)
		rel, inGrafana := strings.CutPrefix(src, "deploy/grafana/")
		if _, err := fs.Stat(grafana, rel); !ok || !inGrafana || err != nil {
			errs = append(errs, fmt.Errorf("docker-compose.yml: grafana: home dashboard %s is no file of deploy/grafana (mounted from %q)", home, src))
		}
	}
	return errs
}

// datasources checks the provisioned datasources and returns their uids.
func datasources(grafana fs.FS, compose monitoringFile) (map[string]bool, []error) {
	files, err := provisioningFiles(grafana, "provisioning/datasources")
	if err != nil {
		return nil, []error{err}
	}
	uids := map[string]bool{}
	var errs []error
	for _, name := range files {
		var p struct {
			Datasources []struct {
				Name string `yaml:"name"`
				UID  string `yaml:"uid"`
				URL  string `yaml:"url"`
			} `yaml:"datasources"`
		}
		if err := readYAML(grafana, name, &p); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, ds := range p.Datasources {
			where := "deploy/grafana/" + name + ": datasource " + ds.Name
			if ds.UID == "" {
				errs = append(errs, fmt.Errorf("%s: no uid, so a dashboard cannot name it", where))
			}
			uids[ds.UID] = true
			u, err := url.Parse(ds.URL)
			if err != nil || u.Port() == "" {
				errs = append(errs, fmt.Errorf("%s: url %q has no host:port", where, ds.URL))
				continue
			}
			svc, ok := compose.Services[u.Hostname()]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: url %s: no compose service %s", where, ds.URL, u.Hostname()))
				continue
			}
			port, _ := strconv.Atoi(u.Port())
			if published, _ := composePorts(svc.Ports); !hasPort(published, port) {
				errs = append(errs, fmt.Errorf("%s: url %s: compose service %s has no port %d", where, ds.URL, u.Hostname(), port))
			}
		}
	}
	if len(uids) == 0 {
		errs = append(errs, fmt.Errorf("deploy/grafana/provisioning/datasources: no datasource"))
	}
	return uids, errs
}

// providerDirs returns the deploy/grafana directories (relative to it) the
// dashboard providers load, as compose mounts them.
func providerDirs(grafana fs.FS, mounts map[string]string) ([]string, []error) {
	files, err := provisioningFiles(grafana, "provisioning/dashboards")
	if err != nil {
		return nil, []error{err}
	}
	var dirs []string
	var errs []error
	for _, name := range files {
		var p struct {
			Providers []struct {
				Name    string `yaml:"name"`
				Options struct {
					Path string `yaml:"path"`
				} `yaml:"options"`
			} `yaml:"providers"`
		}
		if err := readYAML(grafana, name, &p); err != nil {
			errs = append(errs, err)
			continue
		}
		for _, pr := range p.Providers {
			src, ok := resolve(mounts, pr.Options.Path)
			rel, inGrafana := strings.CutPrefix(src, "deploy/grafana/")
			if !ok || !inGrafana {
				errs = append(errs, fmt.Errorf("deploy/grafana/%s: provider %s loads %s, which compose does not mount from deploy/grafana", name, pr.Name, pr.Options.Path))
				continue
			}
			dirs = append(dirs, rel)
		}
	}
	if len(dirs) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("deploy/grafana/provisioning/dashboards: no dashboard provider"))
	}
	return dirs, errs
}

// checkDashboards checks every dashboard JSON in dir names only datasources
// of uids, and that there is one.
func checkDashboards(grafana fs.FS, dir string, uids map[string]bool) []error {
	files, err := fs.Glob(grafana, path.Join(dir, "*.json"))
	if err != nil {
		return []error{fmt.Errorf("deploy/grafana/%s: %w", dir, err)}
	}
	if len(files) == 0 {
		return []error{fmt.Errorf("deploy/grafana/%s: no dashboard JSON", dir)}
	}
	var errs []error
	for _, name := range files {
		raw, err := fs.ReadFile(grafana, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var d dashboard
		if err := json.Unmarshal(raw, &d); err != nil {
			errs = append(errs, fmt.Errorf("deploy/grafana/%s: %w", name, err))
			continue
		}
		for _, p := range d.allPanels() {
			refs := []*datasourceRef{p.Datasource}
			for _, t := range p.Targets {
				refs = append(refs, t.Datasource)
			}
			for _, ref := range refs {
				if ref != nil && ref.UID != "" && !uids[ref.UID] {
					errs = append(errs, fmt.Errorf("deploy/grafana/%s: panel %q uses datasource uid %q, which is not provisioned", name, p.Title, ref.UID))
				}
			}
		}
	}
	return errs
}

// dashboard is the part of a Grafana dashboard JSON the checks read.
type dashboard struct {
	Panels []panel `json:"panels"`
}

// panel is a dashboard panel; a collapsed row holds its panels.
type panel struct {
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	Targets    []struct {
		Datasource *datasourceRef `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

type datasourceRef struct {
	UID string `json:"uid"`
}

// allPanels returns the dashboard's panels, those inside rows included.
func (d dashboard) allPanels() []panel {
	var all []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			all = append(all, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return all
}

// commandArgs reads a compose command in either form.
func commandArgs(command any) []string {
	switch c := command.(type) {
	case string:
		return strings.Fields(c)
	case []any:
		args := make([]string, 0, len(c))
		for _, a := range c {
			args = append(args, fmt.Sprint(a))
		}
		return args
	}
	return nil
}

// bindMounts maps each container path a service mounts from the repository
// to that repository path ("deploy/…"); named volumes are left out.
func bindMounts(volumes []any) map[string]string {
	mounts := map[string]string{}
	for _, v := range volumes {
		var source, target string
		switch v := v.(type) {
		case string:
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				continue
			}
			source, target = parts[0], parts[1]
		case map[string]any:
			source, target = fmt.Sprint(v["source"]), fmt.Sprint(v["target"])
		}
		if !strings.HasPrefix(source, "./") && source != "." {
			continue
		}
		mounts[path.Clean(target)] = path.Clean(source)
	}
	return mounts
}

// resolve returns the repository path a container path comes from, through
// the mount of it or of the nearest directory above it.
func resolve(mounts map[string]string, target string) (string, bool) {
	target = path.Clean(target)
	for dir := target; ; dir = path.Dir(dir) {
		if src, ok := mounts[dir]; ok {
			return path.Join(src, strings.TrimPrefix(target, dir)), true
		}
		if dir == "/" || dir == "." {
			return "", false
		}
	}
}

func checkMount(where string, mounts map[string]string, target, want string) []error {
	got, ok := resolve(mounts, target)
	if !ok {
		return []error{fmt.Errorf("%s: %s is not mounted (want %s from ./%s)", where, target, target, want)}
	}
	if got != want {
		return []error{fmt.Errorf("%s: %s is mounted from ./%s, want ./%s", where, target, got, want)}
	}
	return nil
}

// provisioningFiles lists the YAML files of a provisioning directory.
func provisioningFiles(grafana fs.FS, dir string) ([]string, error) {
	var files []string
	for _, pattern := range []string{"*.yml", "*.yaml"} {
		m, err := fs.Glob(grafana, path.Join(dir, pattern))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("deploy/grafana/%s: no provisioning file", dir)
	}
	slices.Sort(files)
	return files, nil
}

func readYAML(fsys fs.FS, name string, v any) error {
	raw, err := fs.ReadFile(fsys, name)
	if err != nil {
		return fmt.Errorf("deploy/grafana/%s: %w", name, err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("deploy/grafana/%s: %w", name, err)
	}
	return nil
}

func hasPort(published map[int]int, port int) bool {
	_, ok := published[port]
	return ok
}
