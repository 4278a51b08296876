package deployconsistency

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// object is the part of a Kubernetes object the checks read.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`       // ConfigMap, Secret
	StringData map[string]string `yaml:"stringData"` // Secret
	Spec       struct {
		Ports       []servicePort   `yaml:"ports"`    // Service
		Template    yamlPodTemplate `yaml:"template"` // Deployment
		JobTemplate struct {
			Spec struct {
				Template yamlPodTemplate `yaml:"template"`
			} `yaml:"spec"`
		} `yaml:"jobTemplate"` // CronJob
	} `yaml:"spec"`
}

type yamlPodTemplate struct {
	Spec struct {
		Containers []container `yaml:"containers"`
	} `yaml:"spec"`
}

type servicePort struct {
	Port int `yaml:"port"`
}

type container struct {
	Image   string   `yaml:"image"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Ports   []struct {
		ContainerPort int `yaml:"containerPort"`
	} `yaml:"ports"`
	Env []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	EnvFrom []struct {
		ConfigMapRef *struct {
			Name string `yaml:"name"`
		} `yaml:"configMapRef"`
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
}

// ExternalSecret is the Secret every Deployment reads DATABASE_URL,
// CALLBACK_SECRET and ADMIN_TOKEN from; deploy/README.md says how to
// create it.
const ExternalSecret = "fulfillment-secrets"

// CheckKustomize checks the kustomize base in fsys (deploy/base): every
// service has a Deployment and a Service of its FullName, with its image,
// port and environment, every YAML file of the base is a resource of
// kustomization.yaml, and the base ships no Secret: the Deployments read
// ExternalSecret, which the operator creates.
func CheckKustomize(fsys fs.FS, services []suite.Service, documented map[string]bool) []error {
	objects, errs := loadKustomization(fsys)
	byKind := map[string]map[string]object{}
	for _, o := range objects {
		if byKind[o.Kind] == nil {
			byKind[o.Kind] = map[string]object{}
		}
		byKind[o.Kind][o.Metadata.Name] = o
	}
	for _, s := range services {
		errs = append(errs, checkDeployment(byKind, s, services, documented)...)
		svc, ok := byKind["Service"][s.FullName()]
		if !ok {
			errs = append(errs, fmt.Errorf("deploy/base: no Service %s", s.FullName()))
		} else if !slices.ContainsFunc(svc.Spec.Ports, func(p servicePort) bool { return p.Port == s.Port }) {
			errs = append(errs, fmt.Errorf("deploy/base: Service %s does not expose port %d (%v)", s.FullName(), s.Port, svc.Spec.Ports))
		}
	}
	for _, name := range sortedKeys(byKind["Secret"]) {
		errs = append(errs, fmt.Errorf("deploy/base ships Secret %s: its values would be in the repository; reference %s and let the operator create it (deploy/README.md)", name, ExternalSecret))
	}
	errs = append(errs, checkReconciliationSchedule(byKind)...)
	errs = append(errs, unknownServices("deploy/base Deployments", sortedKeys(byKind["Deployment"]), services)...)
	errs = append(errs, unknownServices("deploy/base Services", sortedKeys(byKind["Service"]), services)...)
	return errs
}

func checkDeployment(byKind map[string]map[string]object, s suite.Service, all []suite.Service, documented map[string]bool) []error {
	where := "deploy/base: Deployment " + s.FullName()
	d, ok := byKind["Deployment"][s.FullName()]
	if !ok {
		return []error{fmt.Errorf("deploy/base: no Deployment %s", s.FullName())}
	}
	containers := d.Spec.Template.Spec.Containers
	if len(containers) != 1 {
		return []error{fmt.Errorf("%s: %d containers, want 1", where, len(containers))}
	}
	c := containers[0]
	var errs []error
	if want := ImagePrefix + s.FullName(); strings.Split(c.Image, ":")[0] != want {
		errs = append(errs, fmt.Errorf("%s: image %q, want %q", where, c.Image, want))
	}
	if len(c.Ports) != 1 || c.Ports[0].ContainerPort != s.Port {
		errs = append(errs, fmt.Errorf("%s: container ports %v, want just %d", where, c.Ports, s.Port))
	}
	env, envErrs := containerEnv(byKind, c)
	for _, err := range envErrs {
		errs = append(errs, fmt.Errorf("%s: %w", where, err))
	}
	errs = append(errs, CheckNoSecretValues(where, env, false)...)
	return append(errs, CheckEnv(where, env, s, all, documented, s.HTTPAddr(), URLOf)...)
}

// containerEnv is c's environment as Kubernetes gives it: its envFrom
// sources of the base, then its env.
func containerEnv(byKind map[string]map[string]object, c container) (map[string]string, []error) {
	var errs []error
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		kind, name := "ConfigMap", ""
		switch {
		case from.ConfigMapRef != nil:
			name = from.ConfigMapRef.Name
		case from.SecretRef != nil:
			kind, name = "Secret", from.SecretRef.Name
		}
		src, ok := byKind[kind][name]
		if !ok && kind == "Secret" && name == ExternalSecret {
			continue // created by the operator (deploy/README.md)
		}
		if !ok {
			errs = append(errs, fmt.Errorf("envFrom %s %q is not in the base", kind, name))
			continue
		}
		for k, v := range src.Data {
			env[k] = v
		}
		for k, v := range src.StringData {
			env[k] = v
		}
	}
	for _, e := range c.Env { // env wins over envFrom, as in Kubernetes
		env[e.Name] = e.Value
	}
	return env, errs
}

// reconciliationRuns is the path a scheduler of reconciliation runs posts
// to.
const reconciliationRuns = "/admin/reconciliation/runs"

// checkReconciliationSchedule requires exactly one scheduler of
// reconciliation runs in the base: the reconciliation Deployment with a
// positive RECONCILIATION_INTERVAL (its default, 5m, when unset), or a
// CronJob whose container starts runs; two would start every run twice
// (docs/decisions.md, Reconciliation runs outlive their request).
func checkReconciliationSchedule(byKind map[string]map[string]object) []error {
	var schedulers []string
	for _, name := range sortedKeys(byKind["Deployment"]) {
		for _, c := range byKind["Deployment"][name].Spec.Template.Spec.Containers {
			if !strings.Contains(c.Image, "reconciliation-service") {
				continue
			}
			env, _ := containerEnv(byKind, c)
			interval, set := env["RECONCILIATION_INTERVAL"]
			d, err := time.ParseDuration(interval)
			if !set || err != nil || d > 0 {
				schedulers = append(schedulers, fmt.Sprintf("Deployment %s (RECONCILIATION_INTERVAL=%q)", name, interval))
			}
		}
	}
	for _, name := range sortedKeys(byKind["CronJob"]) {
		for _, c := range byKind["CronJob"][name].Spec.JobTemplate.Spec.Template.Spec.Containers {
			if strings.Contains(strings.Join(append(slices.Clone(c.Command), c.Args...), " "), reconciliationRuns) {
				schedulers = append(schedulers, "CronJob "+name)
			}
		}
	}
	if len(schedulers) != 1 {
		return []error{fmt.Errorf("deploy/base: %d schedulers of reconciliation runs %v, want exactly 1", len(schedulers), schedulers)}
	}
	return nil
}

// loadKustomization reads every object of the resources kustomization.yaml
// lists, and reports YAML files of the base it does not list.
func loadKustomization(fsys fs.FS) ([]object, []error) {
	raw, err := fs.ReadFile(fsys, "kustomization.yaml")
	if err != nil {
		return nil, []error{fmt.Errorf("deploy/base: %w", err)}
	}
	var k struct {
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(raw, &k); err != nil {
		return nil, []error{fmt.Errorf("deploy/base/kustomization.yaml: %w", err)}
	}
	var objects []object
	var errs []error
	for _, res := range k.Resources {
		data, err := fs.ReadFile(fsys, res)
		if err != nil {
			errs = append(errs, fmt.Errorf("deploy/base: resource %s: %w", res, err))
			continue
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var o object
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("deploy/base/%s: %w", res, err))
				break
			}
			if o.Kind != "" {
				objects = append(objects, o)
			}
		}
	}
	files, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		errs = append(errs, err)
	}
	for _, f := range files {
		if f != "kustomization.yaml" && !slices.Contains(k.Resources, f) && !slices.Contains(k.Resources, "./"+f) {
			errs = append(errs, fmt.Errorf("deploy/base/%s is not listed in kustomization.yaml resources", path.Base(f)))
		}
	}
	return objects, errs
}
