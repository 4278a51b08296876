package deployconsistency

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	psaapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/reliable-orders/fulfillment/scripts/suite"
)

// Rendered is the output of one kustomization, each object decoded into
// its Kubernetes API type.
type Rendered struct {
	Where   string // the kustomization, for messages
	Objects []runtime.Object
}

// Render builds the kustomization at dir of fsys with kustomize's own API
// (what `kubectl apply -k` runs, with its default restriction to files
// under the kustomization) and decodes every object strictly into its API
// type: an unknown kind, an unknown or duplicate field fails, as the API
// server's strict field validation would.
func Render(fsys filesys.FileSystem, dir string) (Rendered, []error) {
	r := Rendered{Where: dir}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		return r, []error{fmt.Errorf("kustomize build %s: %w", dir, err)}
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme, rbacv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return r, []error{err}
		}
	}
	strict := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme, json.SerializerOptions{Yaml: true, Strict: true})
	var errs []error
	for _, res := range m.Resources() {
		data, err := res.AsYAML()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s %s: %w", dir, res.GetKind(), res.GetName(), err))
			continue
		}
		obj, _, err := strict.Decode(data, nil, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s %s does not decode strictly into its API type: %w", dir, res.GetKind(), res.GetName(), err))
			continue
		}
		r.Objects = append(r.Objects, obj)
	}
	return r, errs
}

// podTemplate is one pod template of a rendered workload.
type podTemplate struct {
	where    string // "Kind name"
	kind     string
	name     string
	template *corev1.PodTemplateSpec
}

func (r Rendered) podTemplates() []podTemplate {
	var pods []podTemplate
	for _, o := range r.Objects {
		switch o := o.(type) {
		case *appsv1.Deployment:
			pods = append(pods, podTemplate{"Deployment " + o.Name, "Deployment", o.Name, &o.Spec.Template})
		case *appsv1.StatefulSet:
			pods = append(pods, podTemplate{"StatefulSet " + o.Name, "StatefulSet", o.Name, &o.Spec.Template})
		case *appsv1.DaemonSet:
			pods = append(pods, podTemplate{"DaemonSet " + o.Name, "DaemonSet", o.Name, &o.Spec.Template})
		case *batchv1.Job:
			pods = append(pods, podTemplate{"Job " + o.Name, "Job", o.Name, &o.Spec.Template})
		case *batchv1.CronJob:
			pods = append(pods, podTemplate{"CronJob " + o.Name, "CronJob", o.Name, &o.Spec.JobTemplate.Spec.Template})
		case *corev1.Pod:
			pods = append(pods, podTemplate{"Pod " + o.Name, "Pod", o.Name, &corev1.PodTemplateSpec{ObjectMeta: o.ObjectMeta, Spec: o.Spec}})
		}
	}
	return pods
}

func containers(spec *corev1.PodSpec) []corev1.Container {
	return append(slices.Clone(spec.InitContainers), spec.Containers...)
}

// CheckPodSecurity runs every pod template through the Pod Security
// admission library at the "restricted" level of the newest policy
// version: what a namespace labelled
// pod-security.kubernetes.io/enforce=restricted admits.
func CheckPodSecurity(r Rendered) []error {
	evaluator, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		return []error{fmt.Errorf("pod security evaluator: %w", err)}
	}
	restricted := psaapi.LevelVersion{Level: psaapi.LevelRestricted, Version: psaapi.LatestVersion()}
	var errs []error
	for _, p := range r.podTemplates() {
		for _, res := range evaluator.EvaluatePod(restricted, &p.template.ObjectMeta, &p.template.Spec) {
			if !res.Allowed {
				errs = append(errs, fmt.Errorf("%s: %s violates Pod Security \"restricted\": %s (%s)", r.Where, p.where, res.ForbiddenReason, res.ForbiddenDetail))
			}
		}
	}
	return errs
}

// CheckWorkloads checks what every pod template of r must have: images
// pinned to a tag other than latest (or a digest); CPU and memory
// requests and a memory limit on every container, so the scheduler places
// it and a leak ends in its own restart; Jobs and CronJobs taking secrets
// key by key (a run sees only what it uses); and a PodDisruptionBudget
// selecting the pods of every Deployment.
func CheckWorkloads(r Rendered) []error {
	var errs []error
	var pdbs []*policyv1.PodDisruptionBudget
	for _, o := range r.Objects {
		if pdb, ok := o.(*policyv1.PodDisruptionBudget); ok {
			pdbs = append(pdbs, pdb)
		}
	}
	for _, p := range r.podTemplates() {
		where := r.Where + ": " + p.where
		for _, c := range containers(&p.template.Spec) {
			if err := checkImage(c.Image); err != nil {
				errs = append(errs, fmt.Errorf("%s: container %s: %w", where, c.Name, err))
			}
			for _, need := range []struct {
				list corev1.ResourceList
				name corev1.ResourceName
				what string
			}{{c.Resources.Requests, corev1.ResourceCPU, "requests"}, {c.Resources.Requests, corev1.ResourceMemory, "requests"}, {c.Resources.Limits, corev1.ResourceMemory, "limits"}} {
				if _, ok := need.list[need.name]; !ok {
					errs = append(errs, fmt.Errorf("%s: container %s has no resources.%s.%s", where, c.Name, need.what, need.name))
				}
			}
			if p.kind == "Job" || p.kind == "CronJob" {
				for _, from := range c.EnvFrom {
					if from.SecretRef != nil {
						errs = append(errs, fmt.Errorf("%s: container %s takes the whole Secret %s (envFrom); take the keys it uses with env valueFrom secretKeyRef", where, c.Name, from.SecretRef.Name))
					}
				}
			}
		}
		if p.kind != "Deployment" {
			continue
		}
		covered := slices.ContainsFunc(pdbs, func(pdb *policyv1.PodDisruptionBudget) bool {
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			return err == nil && !sel.Empty() && sel.Matches(labels.Set(p.template.Labels))
		})
		if !covered {
			errs = append(errs, fmt.Errorf("%s: no PodDisruptionBudget selects its pods", where))
		}
	}
	return errs
}

// checkImage fails an image reference without a tag or digest, or tagged
// latest: the running version would be whatever the registry held when a
// node pulled it.
func checkImage(image string) error {
	if strings.Contains(image, "@sha256:") {
		return nil
	}
	name := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(name, ":")
	switch {
	case !ok || tag == "":
		return fmt.Errorf("image %q has no tag; pin a version", image)
	case tag == "latest":
		return fmt.Errorf("image %q is tagged latest; pin a version", image)
	}
	return nil
}

// CheckTopicsJob checks that a Job creates both topics with the partition
// count of the embedded broker (suite.Partitions) using redpandaImage, the
// image compose's topics one-shot runs. The Job's command is read with its
// environment expanded, values from the rendered ConfigMaps included.
func CheckTopicsJob(r Rendered, redpandaImage string) []error {
	configMaps := map[string]map[string]string{}
	for _, o := range r.Objects {
		if cm, ok := o.(*corev1.ConfigMap); ok {
			configMaps[cm.Name] = cm.Data
		}
	}
	for _, p := range r.podTemplates() {
		if p.kind != "Job" {
			continue
		}
		for _, c := range p.template.Spec.Containers {
			env := map[string]string{}
			for _, e := range c.Env {
				switch {
				case e.ValueFrom == nil:
					env[e.Name] = e.Value
				case e.ValueFrom.ConfigMapKeyRef != nil:
					env[e.Name] = configMaps[e.ValueFrom.ConfigMapKeyRef.Name][e.ValueFrom.ConfigMapKeyRef.Key]
				}
			}
			script := os.Expand(strings.Join(append(slices.Clone(c.Command), c.Args...), " "), func(name string) string { return env[name] })
			m := topicCreate.FindStringSubmatch(script)
			if m == nil {
				continue
			}
			where := r.Where + ": " + p.where
			var errs []error
			topics := strings.Fields(m[1])
			for _, want := range []string{suite.OrderEventsTopic, suite.DLQTopic} {
				if !slices.Contains(topics, want) {
					errs = append(errs, fmt.Errorf("%s: rpk topic create does not create %s (creates %v)", where, want, topics))
				}
			}
			if n, _ := strconv.Atoi(m[2]); n != suite.Partitions {
				errs = append(errs, fmt.Errorf("%s: topics created with -p %d, want %d partitions (suite.Partitions, as make run)", where, n, suite.Partitions))
			}
			if c.Image != redpandaImage {
				errs = append(errs, fmt.Errorf("%s: image %s, want %s (docker-compose.yml's topics)", where, c.Image, redpandaImage))
			}
			return errs
		}
	}
	return []error{fmt.Errorf("%s: no Job runs `rpk topic create ... -p N`; outside dev mode Redpanda creates no topic, and nothing else creates %s", r.Where, suite.DLQTopic)}
}

// ComposeImage returns the image of a compose service.
func ComposeImage(compose []byte, service string) (string, error) {
	var f struct {
		Services map[string]struct {
			Image string `yaml:"image"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(compose, &f); err != nil {
		return "", fmt.Errorf("docker-compose.yml: %w", err)
	}
	s, ok := f.Services[service]
	if !ok || s.Image == "" {
		return "", fmt.Errorf("docker-compose.yml: no image for service %s", service)
	}
	return s.Image, nil
}

// Scrape annotations on a pod template, the convention
// prometheus-kubernetes.yml reads.
const (
	ScrapeAnnotation = "prometheus.io/scrape"
	PortAnnotation   = "prometheus.io/port"
	PathAnnotation   = "prometheus.io/path"
)

// CheckScrapeAnnotations checks that the pods of every service's
// Deployment ask to be scraped on the service's port at /metrics.
func CheckScrapeAnnotations(r Rendered, services []suite.Service) []error {
	var errs []error
	pods := r.podTemplates()
	for _, s := range services {
		i := slices.IndexFunc(pods, func(p podTemplate) bool { return p.kind == "Deployment" && p.name == s.FullName() })
		if i < 0 {
			errs = append(errs, fmt.Errorf("%s: no Deployment %s", r.Where, s.FullName()))
			continue
		}
		a := pods[i].template.Annotations
		want := map[string]string{ScrapeAnnotation: "true", PortAnnotation: strconv.Itoa(s.Port), PathAnnotation: "/metrics"}
		for _, k := range []string{ScrapeAnnotation, PortAnnotation, PathAnnotation} {
			if a[k] != want[k] {
				errs = append(errs, fmt.Errorf("%s: Deployment %s: pod annotation %s=%q, want %q", r.Where, s.FullName(), k, a[k], want[k]))
			}
		}
	}
	return errs
}

// kubernetesSD is the part of a kubernetes_sd_configs entry the check
// reads.
type kubernetesSD struct {
	Role string `yaml:"role"`
}

// relabelConfig is one relabel_configs entry; only the actions the
// Kubernetes configuration uses are applied (see relabel).
type relabelConfig struct {
	SourceLabels []string `yaml:"source_labels"`
	Separator    *string  `yaml:"separator"`
	Regex        *string  `yaml:"regex"`
	TargetLabel  string   `yaml:"target_label"`
	Replacement  *string  `yaml:"replacement"`
	Action       string   `yaml:"action"`
}

// CheckKubernetesPrometheus checks the pod discovery of config
// (deploy/prometheus/prometheus-kubernetes.yml) against r: it builds the
// labels Prometheus's role-pod discovery gives each pod of r, applies the
// relabelling and expects every service's pods, and no other pod, to
// become a target at the pod's IP and the service's port, at /metrics, with
// job the service's name and instance the pod's name, so a scaled
// service's replicas are separate series. Only the relabel actions keep,
// drop and replace are applied; another one fails the check, since its
// effect would go unchecked. The Debian promtool is built without
// Kubernetes discovery and cannot load this file.
func CheckKubernetesPrometheus(config []byte, r Rendered, services []suite.Service) []error {
	const where = "deploy/prometheus/prometheus-kubernetes.yml"
	var cfg struct {
		ScrapeConfigs []struct {
			JobName        string          `yaml:"job_name"`
			MetricsPath    string          `yaml:"metrics_path"`
			KubernetesSD   []kubernetesSD  `yaml:"kubernetes_sd_configs"`
			StaticConfigs  []any           `yaml:"static_configs"`
			RelabelConfigs []relabelConfig `yaml:"relabel_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(config, &cfg); err != nil {
		return []error{fmt.Errorf("%s: %w", where, err)}
	}
	var errs []error
	want := map[string]suite.Service{}
	for _, s := range services {
		want[s.FullName()] = s
	}
	scraped := map[string]bool{}
	for _, sc := range cfg.ScrapeConfigs {
		if len(sc.StaticConfigs) > 0 {
			errs = append(errs, fmt.Errorf("%s: job %s has static targets; in Kubernetes a name is a Service, whose replicas' counters would interleave", where, sc.JobName))
		}
		if !slices.ContainsFunc(sc.KubernetesSD, func(sd kubernetesSD) bool { return sd.Role == "pod" }) {
			continue
		}
		metricsPath := sc.MetricsPath
		if metricsPath == "" {
			metricsPath = "/metrics"
		}
		for _, p := range r.podTemplates() {
			podName := p.name + "-5d8f9c7b4-x2k9q"
			lbls := podDiscoveryLabels(p, podName, "10.1.2.3", sc.JobName, metricsPath)
			target, kept, err := relabel(lbls, sc.RelabelConfigs)
			if err != nil {
				return append(errs, fmt.Errorf("%s: job %s: %w", where, sc.JobName, err))
			}
			s, isService := want[p.name]
			isService = isService && p.kind == "Deployment"
			switch {
			case !kept && isService:
				errs = append(errs, fmt.Errorf("%s: job %s drops the pods of %s", where, sc.JobName, p.where))
			case kept && !isService:
				errs = append(errs, fmt.Errorf("%s: job %s scrapes the pods of %s, which do not ask to be scraped", where, sc.JobName, p.where))
			case kept:
				scraped[p.name] = true
				wantTarget := map[string]string{"__address__": "10.1.2.3:" + strconv.Itoa(s.Port), "__metrics_path__": "/metrics", "job": s.FullName(), "instance": podName}
				for _, k := range []string{"__address__", "__metrics_path__", "job", "instance"} {
					if target[k] != wantTarget[k] {
						errs = append(errs, fmt.Errorf("%s: job %s gives a pod of %s %s=%q, want %q", where, sc.JobName, p.where, k, target[k], wantTarget[k]))
					}
				}
			}
		}
	}
	for _, s := range services {
		if !scraped[s.FullName()] {
			errs = append(errs, fmt.Errorf("%s: no pod-discovery job scrapes the pods of %s", where, s.FullName()))
		}
	}
	return errs
}

// podDiscoveryLabels are the labels role-pod discovery gives the target of
// a pod's first declared port (one target per declared port; the services
// declare one).
func podDiscoveryLabels(p podTemplate, podName, ip, job, metricsPath string) map[string]string {
	sanitize := regexp.MustCompile(`[^a-zA-Z0-9_]`) // as Prometheus names meta labels
	l := map[string]string{
		"job":                             job,
		"__metrics_path__":                metricsPath,
		"__scheme__":                      "http",
		"__meta_kubernetes_pod_name":      podName,
		"__meta_kubernetes_pod_ip":        ip,
		"__meta_kubernetes_pod_phase":     "Running",
		"__meta_kubernetes_namespace":     "fulfillment",
		"__address__":                     ip,
		"__meta_kubernetes_pod_ready":     "true",
		"__meta_kubernetes_pod_host_ip":   "10.0.0.1",
		"__meta_kubernetes_pod_uid":       "00000000-0000-0000-0000-000000000000",
		"__meta_kubernetes_pod_node_name": "node-1",
	}
	for k, v := range p.template.Labels {
		l["__meta_kubernetes_pod_label_"+sanitize.ReplaceAllString(k, "_")] = v
	}
	for k, v := range p.template.Annotations {
		l["__meta_kubernetes_pod_annotation_"+sanitize.ReplaceAllString(k, "_")] = v
	}
	if cs := p.template.Spec.Containers; len(cs) > 0 {
		l["__meta_kubernetes_pod_container_name"] = cs[0].Name
		if len(cs[0].Ports) > 0 {
			port := strconv.Itoa(int(cs[0].Ports[0].ContainerPort))
			l["__address__"] = ip + ":" + port
			l["__meta_kubernetes_pod_container_port_number"] = port
			l["__meta_kubernetes_pod_container_port_name"] = cs[0].Ports[0].Name
		}
	}
	return l
}

// relabel applies cfgs to lbls as Prometheus does for the actions keep,
// drop and replace (defaults: separator ";", regex "(.*)" anchored at both
// ends, replacement "$1"; a replace whose result is empty removes the
// label), then drops the "__" labels a scrape does not read and defaults
// instance to the address. kept is false when a keep or drop removed the
// target.
func relabel(lbls map[string]string, cfgs []relabelConfig) (target map[string]string, kept bool, err error) {
	l := map[string]string{}
	for k, v := range lbls {
		l[k] = v
	}
	for _, c := range cfgs {
		sep, expr, repl := ";", "(.*)", "$1"
		if c.Separator != nil {
			sep = *c.Separator
		}
		if c.Regex != nil {
			expr = *c.Regex
		}
		if c.Replacement != nil {
			repl = *c.Replacement
		}
		re, err := regexp.Compile("^(?s:" + expr + ")$")
		if err != nil {
			return nil, false, fmt.Errorf("regex %q: %w", expr, err)
		}
		values := make([]string, len(c.SourceLabels))
		for i, name := range c.SourceLabels {
			values[i] = l[name]
		}
		value := strings.Join(values, sep)
		switch c.Action {
		case "keep":
			if !re.MatchString(value) {
				return nil, false, nil
			}
		case "drop":
			if re.MatchString(value) {
				return nil, false, nil
			}
		case "", "replace":
			m := re.FindStringSubmatchIndex(value)
			if m == nil {
				continue
			}
			if c.TargetLabel == "" {
				return nil, false, errors.New("replace without target_label")
			}
			result := string(re.ExpandString(nil, repl, value, m))
			if result == "" {
				delete(l, c.TargetLabel)
			} else {
				l[c.TargetLabel] = result
			}
		default:
			return nil, false, fmt.Errorf("relabel action %q is not applied by this check; extend it", c.Action)
		}
	}
	if l["instance"] == "" {
		l["instance"] = l["__address__"]
	}
	for k := range l {
		if strings.HasPrefix(k, "__") && k != "__address__" && k != "__metrics_path__" && k != "__scheme__" {
			delete(l, k)
		}
	}
	return l, true, nil
}
