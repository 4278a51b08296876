package deployconsistency_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/reliable-orders/fulfillment/scripts/suite"
	"github.com/reliable-orders/fulfillment/tools/dev/internal/deployconsistency"
)

// The kustomizations a user applies; the dev overlay includes
// deploy/prometheus and deploy/postgres.
const (
	baseDir = "deploy/base"
	devDir  = "deploy/overlays/dev"
)

// devSecretFiles are the files the dev overlay's secretGenerator reads,
// which the user writes and git ignores; the test writes placeholders.
var devSecretFiles = map[string]string{
	devDir + "/secrets.env":  "DATABASE_URL=postgres://postgres:pw@postgres:5432/postgres?sslmode=disable\nCALLBACK_SECRET=0123456789abcdef0123456789abcdef\nADMIN_TOKEN=0123456789abcdef0123456789abcdef\n",
	devDir + "/postgres.env": "POSTGRES_PASSWORD=pw\n",
}

// kubeRepo is every file under deploy/ (path from the repository root)
// and docker-compose.yml.
type kubeRepo struct {
	files   map[string][]byte
	compose []byte
}

func loadKubeRepo(t *testing.T) kubeRepo {
	t.Helper()
	root := repoRoot(t)
	r := kubeRepo{files: map[string][]byte{}}
	err := filepath.WalkDir(filepath.Join(root, "deploy"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		r.files[filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range devSecretFiles {
		r.files[name] = []byte(data)
	}
	if r.compose, err = os.ReadFile(filepath.Join(root, "docker-compose.yml")); err != nil {
		t.Fatal(err)
	}
	return r
}

// check renders the base and the dev overlay and runs every Kubernetes
// check on both.
func (r kubeRepo) check(t *testing.T) []error {
	t.Helper()
	fsys := filesys.MakeFsInMemory()
	for name, data := range r.files {
		if err := fsys.MkdirAll(path.Dir("/" + name)); err != nil {
			t.Fatal(err)
		}
		if err := fsys.WriteFile("/"+name, data); err != nil {
			t.Fatal(err)
		}
	}
	redpanda, err := deployconsistency.ComposeImage(r.compose, "topics")
	if err != nil {
		return []error{err}
	}
	services := suite.Services()
	var errs []error
	for _, dir := range []string{baseDir, devDir} {
		rendered, renderErrs := deployconsistency.Render(fsys, "/"+dir)
		rendered.Where = dir
		errs = append(errs, renderErrs...)
		errs = append(errs, deployconsistency.CheckPodSecurity(rendered)...)
		errs = append(errs, deployconsistency.CheckWorkloads(rendered)...)
		errs = append(errs, deployconsistency.CheckTopicsJob(rendered, redpanda)...)
		errs = append(errs, deployconsistency.CheckScrapeAnnotations(rendered, services)...)
		if dir == devDir {
			errs = append(errs, deployconsistency.CheckKubernetesPrometheus(r.files["deploy/prometheus/prometheus-kubernetes.yml"], rendered, services)...)
		}
	}
	return errs
}

func TestKubernetesManifests(t *testing.T) {
	for _, err := range loadKubeRepo(t).check(t) {
		t.Error(err)
	}
}

// TestKubernetesChecksCatch plants one fault at a time in a file under
// deploy/ and expects the checks to name it.
func TestKubernetesChecksCatch(t *testing.T) {
	const (
		order    = "deploy/base/order-service.yaml"
		cron     = "deploy/base/reconciliation-cronjob.yaml"
		topics   = "deploy/base/topics-job.yaml"
		kustom   = "deploy/base/kustomization.yaml"
		promK8s  = "deploy/prometheus/prometheus-kubernetes.yml"
		redpanda = "deploy/overlays/dev/redpanda.yaml"
	)
	tests := []struct {
		name, file, old, new, want string
	}{
		{"an unknown field", order, "      terminationGracePeriodSeconds: 30\n", "      terminationGracePeriodSeconds: 30\n      terminationGraceSeconds: 30\n", `unknown field "spec.template.spec.terminationGraceSeconds"`},
		{"a misplaced field", topics, "  backoffLimit: 10\n", "  backoffLimit: 10\n  restartPolicy: Never\n", `Job create-topics does not decode strictly`},
		{"an unknown kind", order, "kind: PodDisruptionBudget", "kind: PodDisruptionBudgett", `no kind "PodDisruptionBudgett" is registered`},
		{"no seccomp profile", order, "        seccompProfile:\n          type: RuntimeDefault\n", "", `Deployment order-service violates Pod Security "restricted": seccompProfile`},
		{"root allowed", cron, "            runAsNonRoot: true\n            runAsUser: 65532\n", "            runAsUser: 0\n", `CronJob reconciliation-run violates Pod Security "restricted": runAsNonRoot != true`},
		{"privilege escalation", topics, "allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true", `Job create-topics violates Pod Security "restricted": allowPrivilegeEscalation != false`},
		{"a capability kept", redpanda, `drop: ["ALL"]`, `drop: ["NET_RAW"]`, `StatefulSet redpanda violates Pod Security "restricted": unrestricted capabilities`},
		{"an image tagged latest", kustom, "  - name: fulfillment/points-service\n    newTag: v0.1.0\n", "  - name: fulfillment/points-service\n    newTag: latest\n", `image "fulfillment/points-service:latest" is tagged latest`},
		{"an image without a tag", kustom, "  - name: fulfillment/points-service\n    newTag: v0.1.0\n", "", `image "fulfillment/points-service" has no tag`},
		{"a third-party image without a tag", cron, "image: curlimages/curl:8.11.1", "image: curlimages/curl", `image "curlimages/curl" has no tag`},
		{"no memory limit", order, "            limits:\n              memory: 256Mi\n", "", "container order-service has no resources.limits.memory"},
		{"no CPU request", topics, "              cpu: 10m\n", "", "container rpk has no resources.requests.cpu"},
		{"the CronJob takes the whole Secret", cron, "              env:\n", "              envFrom:\n                - secretRef:\n                    name: fulfillment-secrets\n              env:\n", "takes the whole Secret fulfillment-secrets (envFrom)"},
		{"a Deployment without a PDB", order, "kind: PodDisruptionBudget", "kind: ConfigMap", "Deployment order-service: no PodDisruptionBudget selects its pods"},
		{"a PDB selecting other pods", order, "  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: order-service\n", "  maxUnavailable: 1\n  selector:\n    matchLabels:\n      app.kubernetes.io/name: orders\n", "Deployment order-service: no PodDisruptionBudget selects its pods"},
		{"no topics Job", kustom, "  - topics-job.yaml\n", "", "no Job runs `rpk topic create ... -p N`"},
		{"the topics Job misses the DLQ", topics, "rpk topic create $ORDER_EVENTS_TOPIC $DLQ_TOPIC -p", "rpk topic create $ORDER_EVENTS_TOPIC -p", "rpk topic create does not create order-events.dlq"},
		{"the topics Job creates other partitions", topics, "$DLQ_TOPIC -p 64", "$DLQ_TOPIC -p 12", "topics created with -p 12, want 64"},
		{"the topics Job runs another Redpanda", topics, "redpanda:v26.1.9", "redpanda:v25.1.1", "want docker.redpanda.com/redpandadata/redpanda:v26.1.9 (docker-compose.yml's topics)"},
		{"a service pod not annotated", order, `prometheus.io/scrape: "true"`, `prometheus.io/scrape: "false"`, `Deployment order-service: pod annotation prometheus.io/scrape="false"`},
		{"a service pod annotated with another port", order, `prometheus.io/port: "8081"`, `prometheus.io/port: "9081"`, `pod annotation prometheus.io/port="9081", want "8081"`},
		{"prometheus scrapes every pod", promK8s, "        action: keep\n        regex: \"true\"\n", "        action: keep\n        regex: \".*\"\n", "scrapes the pods of Job create-topics, which do not ask to be scraped"},
		{"prometheus drops the port", promK8s, "replacement: $1:$2", "replacement: $1", `__address__="10.1.2.3", want "10.1.2.3:8081"`},
		{"prometheus names the instance by address", promK8s, "      - source_labels: [__meta_kubernetes_pod_name]\n        action: replace\n        target_label: instance\n", "", `instance="10.1.2.3:8083", want "inventory-service-5d8f9c7b4-x2k9q"`},
		{"prometheus keeps the default job", promK8s, "        target_label: job\n", "        target_label: service\n", `job="kubernetes-pods", want "payment-service"`},
		{"prometheus scrapes a Service", promK8s, "  - job_name: kubernetes-pods\n", "  - job_name: order-service\n    static_configs:\n      - targets: [\"order-service:8081\"]\n  - job_name: kubernetes-pods\n", "job order-service has static targets"},
		{"an unapplied relabel action", promK8s, "        action: keep\n", "        action: labelmap\n", `relabel action "labelmap" is not applied by this check`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel() // each case renders its own copy
			r := loadKubeRepo(t)
			data, ok := r.files[tt.file]
			if !ok {
				t.Fatalf("no %s", tt.file)
			}
			if !strings.Contains(string(data), tt.old) {
				t.Fatalf("%s does not contain %q: update the test", tt.file, tt.old)
			}
			r.files[tt.file] = []byte(strings.Replace(string(data), tt.old, tt.new, 1))
			errs := r.check(t)
			for _, err := range errs {
				if strings.Contains(err.Error(), tt.want) {
					return
				}
			}
			t.Errorf("no error says %q; got %v", tt.want, errs)
		})
	}
}
