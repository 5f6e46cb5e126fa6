#!/usr/bin/env bash
# Checks the Helm chart charts/ofp offline (STYLE.md "Charts"):
#   1. helm lint --strict with every charts/ofp/ci/*-values.yaml
#   2. helm template with each of them, for the oldest supported and a current Kubernetes version
#   3. the rendered manifests against the Kubernetes JSON schemas (kubernetes-validate, strict: unknown
#      fields fail), offline: the schemas ship inside the PyPI package
#   4. the renders' own consistency: selectors, ports and backends that point at rendered objects, the
#      secure pod defaults, the migration hook, each service's TARGET and probes; the admin API on a
#      ClusterIP Service of its own that no Ingress path names, reached only by networkPolicy.admin.from;
#      Kafka credentials as files of mounted Secrets (never inline); Strimzi KafkaTopics (every stream)
#      and KafkaUsers (each service's ACLs) against the fields of the kafka.strimzi.io/v1beta2 schema
#   5. values.schema.json: wrong types and unknown keys fail the render because of the schema, and a
#      render without the required addresses fails with the chart's own message
#   6. every value documented (`## @param`) and the README's parameters table up to date
#   7. the monitoring: the PrometheusRule's rules pass `promtool check rules` and the unit tests of
#      charts/ofp/tests/alerts.test.yaml (`promtool test rules`), and every PromQL expression of the
#      Grafana dashboard parses (promtool, as recording rules)
#   8. skaffold.yaml's setValueTemplates render into values the chart takes
#   9. helm package
# Tools come from the registries only and are cached in .cache/ (git-ignored): helm is built with
# `go install` (about 3 minutes on 2 cores the first time), kubernetes-validate from PyPI into a venv,
# the Bitnami readme generator from npm, promtool with `go install` (about 4 minutes the first time).
# Set HELM=/path/to/helm to use another helm 3 binary. With --tools-only it fetches the tools and stops
# (.ci/run does so in the background while it installs, typechecks and lints).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHART="$ROOT/charts/ofp"
CACHE="$ROOT/.cache"

HELM_VERSION="v3.21.4"
KUBERNETES_VALIDATE_VERSION="1.37.0"
README_GENERATOR_VERSION="2.7.2"
# Prometheus 3.x's Go module version (github.com/prometheus/prometheus v0.3xx = Prometheus 3.x).
PROMTOOL_MODULE_VERSION="v0.316.0"
# The chart's kubeVersion floor (Chart.yaml) and a current release.
KUBE_VERSIONS=("1.25.0" "1.36.0")

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

step() { printf '\n==> %s\n' "$*"; }
ok() { printf '    ok: %s\n' "$*"; }
die() {
  printf '    FAILED: %s\n' "$*" >&2
  exit 1
}

# --- tools -----------------------------------------------------------------------------------------

ensure_helm() {
  local cached="$CACHE/bin/helm"
  if [[ -n "${HELM:-}" ]]; then
    return
  fi
  if [[ -x "$cached" ]] && [[ "$("$cached" version --template '{{.Version}}')" == "$HELM_VERSION" ]]; then
    HELM="$cached"
    return
  fi
  if command -v helm >/dev/null 2>&1 && [[ "$(helm version --template '{{.Version}}')" == v3.* ]]; then
    HELM="$(command -v helm)"
    return
  fi
  step "building helm $HELM_VERSION with go install into $CACHE/bin (first run only)"
  command -v go >/dev/null 2>&1 || die "no helm on PATH, none cached, and no Go toolchain to build one"
  # The release Makefile's link flags: the version, and the Kubernetes version that `helm template`
  # and `helm lint` assume (client-go's minor; without it helm assumes 1.20).
  local gomod client_go minor
  gomod="$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
  client_go="$(awk '$1 == "k8s.io/client-go" { print $2 }' "$gomod")"
  minor="$(cut -d. -f2 <<<"$client_go")"
  [[ "$minor" =~ ^[0-9]+$ ]] || die "could not read the client-go version of helm $HELM_VERSION"
  local start=$SECONDS
  mkdir -p "$CACHE/bin"
  CGO_ENABLED=0 GOBIN="$CACHE/bin" go install -trimpath -ldflags "-s -w \
    -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 \
    -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 \
    -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$minor" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  ok "built in $((SECONDS - start)) s"
  HELM="$cached"
}

ensure_kubernetes_validate() {
  local venv="$CACHE/kubernetes-validate-$KUBERNETES_VALIDATE_VERSION"
  KUBERNETES_VALIDATE="$venv/bin/kubernetes-validate"
  PYTHON="$venv/bin/python"
  if [[ -x "$KUBERNETES_VALIDATE" ]]; then
    return
  fi
  step "installing kubernetes-validate $KUBERNETES_VALIDATE_VERSION from PyPI into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$KUBERNETES_VALIDATE_VERSION"
}

ensure_readme_generator() {
  local dir="$CACHE/readme-generator-$README_GENERATOR_VERSION"
  README_GENERATOR="$dir/node_modules/.bin/readme-generator"
  if [[ -x "$README_GENERATOR" ]]; then
    return
  fi
  step "installing @bitnami/readme-generator-for-helm $README_GENERATOR_VERSION from npm into $dir"
  mkdir -p "$dir"
  (cd "$dir" && printf '{"private":true}\n' >package.json &&
    npm install --no-audit --no-fund --loglevel=error "@bitnami/readme-generator-for-helm@$README_GENERATOR_VERSION" >/dev/null)
}

ensure_promtool() {
  local dir="$CACHE/promtool-$PROMTOOL_MODULE_VERSION"
  PROMTOOL="$dir/promtool"
  if [[ -x "$PROMTOOL" ]]; then
    return
  fi
  step "building promtool ($PROMTOOL_MODULE_VERSION) with go install into $dir (first run only)"
  command -v go >/dev/null 2>&1 || die "no Go toolchain to build promtool"
  local start=$SECONDS
  mkdir -p "$dir"
  # remove_all_sd: none of the service-discovery plugins, which promtool's checks here do not use.
  CGO_ENABLED=0 GOBIN="$dir" go install -trimpath -tags remove_all_sd -ldflags "-s -w" \
    "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_MODULE_VERSION"
  ok "built in $((SECONDS - start)) s"
}

ensure_helm
ensure_kubernetes_validate
ensure_readme_generator
ensure_promtool
step "tools"
ok "helm $("$HELM" version --template '{{.Version}} ({{.GoVersion}})') at $HELM"
ok "kubernetes-validate $("$KUBERNETES_VALIDATE" --version)"
ok "readme-generator-for-helm $README_GENERATOR_VERSION"
# `go install` leaves promtool's own version empty: the module's is the one built.
ok "promtool from github.com/prometheus/prometheus $PROMTOOL_MODULE_VERSION at $PROMTOOL"
[[ "${1:-}" != --tools-only ]] || exit 0

shopt -s nullglob
CASES=("$CHART"/ci/*-values.yaml)
shopt -u nullglob
((${#CASES[@]} > 0)) || die "no $CHART/ci/*-values.yaml"

# --- 1. lint ---------------------------------------------------------------------------------------

step "helm lint --strict with each ci/*-values.yaml"
for values in "${CASES[@]}"; do
  for kube in "${KUBE_VERSIONS[@]}"; do
    if ! "$HELM" lint --strict "$CHART" --values "$values" --kube-version "$kube" >"$WORK/lint.out" 2>&1; then
      cat "$WORK/lint.out" >&2
      die "helm lint $(basename "$values") (Kubernetes $kube)"
    fi
  done
  ok "$(basename "$values")"
done

# --- 2. template and 3. Kubernetes schemas ---------------------------------------------------------

step "helm template each case and validate the manifests against the Kubernetes schemas (strict)"
for values in "${CASES[@]}"; do
  name="$(basename "$values" .yaml)"
  for kube in "${KUBE_VERSIONS[@]}"; do
    rendered="$WORK/$name-$kube.yaml"
    "$HELM" template ofp "$CHART" --namespace ofp --values "$values" --kube-version "$kube" >"$rendered" ||
      die "helm template $name (Kubernetes $kube)"
    if ! "$KUBERNETES_VALIDATE" --strict --quiet -k "$kube" "$rendered" >"$WORK/validate.out" 2>&1; then
      cat "$WORK/validate.out" >&2
      die "$name does not validate against Kubernetes $kube"
    fi
    # The Prometheus Operator's, Strimzi's and KEDA's CRDs have no schema in the package; steps 4 and 7 check them.
    if grep -v -e "kind ServiceMonitor with api version monitoring.coreos.com/v1" \
      -e "kind PrometheusRule with api version monitoring.coreos.com/v1" \
      -e "kind KafkaTopic with api version kafka.strimzi.io/v1beta2" \
      -e "kind KafkaUser with api version kafka.strimzi.io/v1beta2" \
      -e "kind ScaledObject with api version keda.sh/v1alpha1" "$WORK/validate.out" | grep -q .; then
      cat "$WORK/validate.out" >&2
      die "$name: unexpected kubernetes-validate output (a kind without a schema?)"
    fi
  done
  ok "$name: $(grep -c '^kind:' "$WORK/$name-${KUBE_VERSIONS[0]}.yaml") objects, Kubernetes ${KUBE_VERSIONS[*]}"
done

# --- 4. consistency of the renders -----------------------------------------------------------------

step "consistency of each render (references, secure pod defaults, migration hook, probes)"
for values in "${CASES[@]}"; do
  name="$(basename "$values" .yaml)"
  "$PYTHON" - "$WORK/$name-${KUBE_VERSIONS[0]}.yaml" "$values" "$CHART/values.yaml" "$CHART/templates/_helpers.tpl" <<'PY' || die "$name"
import sys
import yaml

rendered_path, case_path, defaults_path = sys.argv[1:4]  # argv[4]: _helpers.tpl (the streams)
docs = [d for d in yaml.safe_load_all(open(rendered_path)) if d]
case = yaml.safe_load(open(case_path)) or {}
defaults = yaml.safe_load(open(defaults_path))
problems = []


def merged(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for k, v in b.items():
            out[k] = merged(a.get(k), v) if k in a else v
        return out
    return b


values = merged(defaults, case)


def by_kind(kind):
    return [d for d in docs if d["kind"] == kind]


def name_of(d):
    return f'{d["kind"]}/{d["metadata"]["name"]}'


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in (selector or {}).items())


HOOK = "helm.sh/hook"
hooks = [d for d in docs if HOOK in (d["metadata"].get("annotations") or {})]
regular = [d for d in docs if d not in hooks]
deployments = by_kind("Deployment")
services = by_kind("Service")
jobs = by_kind("Job")

for d in docs:
    labels = d["metadata"].get("labels") or {}
    for key in ("app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version",
                "app.kubernetes.io/managed-by", "helm.sh/chart"):
        if key not in labels:
            problems.append(f"{name_of(d)}: no label {key}")

services_enabled = {"auth": "auth", "api": "api", "projector": "projector",
                    "webhookDispatcher": "webhook-dispatcher"}
expected = {c for k, c in services_enabled.items() if values[k]["enabled"]}
found = {d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] for d in deployments}
if found != expected:
    problems.append(f"Deployments for {sorted(found)}, expected {sorted(expected)}")

external_secrets = {s for s in (values.get("existingSecret"), values.get("extraEnvVarsSecret")) if s}
external_configmaps = {c for c in (values.get("extraEnvVarsCM"),) if c}


def check_pod(owner, pod_spec, container_ports_needed, available):
    secrets, configmaps, accounts = available
    if pod_spec.get("automountServiceAccountToken") is not False:
        problems.append(f"{owner}: automountServiceAccountToken is not false")
    sa = pod_spec.get("serviceAccountName", "default")
    if sa != "default" and sa not in accounts and sa != values["serviceAccount"]["name"]:
        problems.append(f"{owner}: ServiceAccount {sa} is not rendered")
    pod_sc = pod_spec.get("securityContext") or {}
    volumes = {v["name"]: v for v in pod_spec.get("volumes") or []}
    for c in pod_spec["containers"]:
        sc = c.get("securityContext") or {}
        want = {"runAsNonRoot": True, "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False}
        for k, v in want.items():
            if sc.get(k) != v:
                problems.append(f"{owner}: container {c['name']} securityContext.{k} is not {v}")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            problems.append(f"{owner}: container {c['name']} does not drop ALL capabilities")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp != "RuntimeDefault":
            problems.append(f"{owner}: container {c['name']} seccompProfile is {seccomp}")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) != 1000:
            problems.append(f"{owner}: container {c['name']} does not run as uid 1000")
        tmp = [m for m in c.get("volumeMounts") or [] if m["mountPath"] == "/tmp"]
        if not tmp or "emptyDir" not in volumes.get(tmp[0]["name"], {}):
            problems.append(f"{owner}: container {c['name']} has no emptyDir at /tmp")
        ports = {p["name"] for p in c.get("ports") or []}
        for p in container_ports_needed:
            if p not in ports:
                problems.append(f"{owner}: container {c['name']} has no port {p}")
        for e in c.get("env") or []:
            ref = (e.get("valueFrom") or {}).get("secretKeyRef")
            if ref and ref["name"] not in secrets | external_secrets:
                problems.append(f"{owner}: env {e['name']} reads Secret {ref['name']}, which is not available")
        for e in c.get("envFrom") or []:
            if "configMapRef" in e and e["configMapRef"]["name"] not in configmaps | external_configmaps:
                problems.append(f"{owner}: envFrom ConfigMap {e['configMapRef']['name']} is not available")
            if "secretRef" in e and e["secretRef"]["name"] not in secrets | external_secrets:
                problems.append(f"{owner}: envFrom Secret {e['secretRef']['name']} is not available")


def names(kind, source):
    return {d["metadata"]["name"] for d in source if d["kind"] == kind}


# Regular resources exist when the Deployments start; before install, hooks see only other hooks.
release_available = (names("Secret", regular), names("ConfigMap", regular), names("ServiceAccount", regular))
hook_available = (names("Secret", hooks), names("ConfigMap", hooks), names("ServiceAccount", hooks))

for d in deployments:
    spec = d["spec"]
    pod = spec["template"]
    component = pod["metadata"]["labels"]["app.kubernetes.io/component"]
    if not matches(spec["selector"]["matchLabels"], pod["metadata"]["labels"]):
        problems.append(f"{name_of(d)}: selector does not match its pod labels")
    check_pod(name_of(d), pod["spec"], ["http"], release_available)
    container = pod["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container.get("env") or []}
    if env.get("TARGET") != component:
        problems.append(f"{name_of(d)}: TARGET is {env.get('TARGET')}, expected {component}")
    if "DATABASE_URL" not in env:
        problems.append(f"{name_of(d)}: no DATABASE_URL")
    probes = {p: (container.get(p) or {}).get("httpGet", {}).get("path")
              for p in ("livenessProbe", "readinessProbe", "startupProbe")}
    want = {"livenessProbe": "/livez", "readinessProbe": "/readyz", "startupProbe": "/livez"}
    for p, path in want.items():
        if values[[k for k, c in services_enabled.items() if c == component][0]][p]["enabled"] and probes[p] != path:
            problems.append(f"{name_of(d)}: {p} path is {probes[p]}, expected {path}")
    if "terminationGracePeriodSeconds" not in pod["spec"]:
        problems.append(f"{name_of(d)}: no terminationGracePeriodSeconds")
    if not [s for s in services if matches(s["spec"]["selector"], pod["metadata"]["labels"])]:
        problems.append(f"{name_of(d)}: no Service selects it")

for s in services:
    targets = [d for d in deployments if matches(s["spec"]["selector"], d["spec"]["template"]["metadata"]["labels"])]
    if len(targets) != 1:
        problems.append(f"{name_of(s)}: selects {len(targets)} Deployments")

service_ports = {s["metadata"]["name"]: {p["port"] for p in s["spec"]["ports"]} for s in services}
for ing in by_kind("Ingress"):
    routes = {}
    for rule in ing["spec"]["rules"]:
        for p in rule["http"]["paths"]:
            backend = p["backend"]["service"]
            if backend["port"]["number"] not in service_ports.get(backend["name"], set()):
                problems.append(f"{name_of(ing)}: {p['path']} goes to {backend['name']}:{backend['port']['number']}, not rendered")
            routes[p["path"]] = backend["name"]
    def component_of(path):
        svc = routes.get(path)
        return svc and next((c for c in services_enabled.values() if svc.endswith("-" + c)), None)
    for p in [p for rule in ing["spec"]["rules"] for p in rule["http"]["paths"]]:
        if p["backend"]["service"]["name"].endswith("-auth-admin") or p["path"].startswith("/admin"):
            problems.append(f"{name_of(ing)}: {p['path']} routes the admin API ({p['backend']['service']['name']}) to the outside")
    expected_routes = {"/oauth": "auth", "/.well-known": "auth",
                       "/v2/authenticate": "auth", "/api/v2/authenticate": "auth",
                       "/v2/webhooks": "webhook-dispatcher", "/v2/webhook_deliveries": "webhook-dispatcher",
                       "/api/v2/webhooks": "webhook-dispatcher", "/api/v2/webhook_deliveries": "webhook-dispatcher",
                       "/v2/webhook_event_types": "webhook-dispatcher",
                       "/api/v2/webhook_event_types": "webhook-dispatcher",
                       "/portal": "webhook-dispatcher",
                       "/v2": "api", "/api/v2": "api",
                       "/openapi.json": "api", "/asyncapi.json": "api", "/docs": "api"}
    for path, component in expected_routes.items():
        if component in expected and component_of(path) != component:
            problems.append(f"{name_of(ing)}: {path} goes to {routes.get(path)}, expected the {component} Service")

for hpa in by_kind("HorizontalPodAutoscaler"):
    ref = hpa["spec"]["scaleTargetRef"]
    target = [d for d in deployments if d["metadata"]["name"] == ref["name"]]
    if ref["kind"] != "Deployment" or not target:
        problems.append(f"{name_of(hpa)}: scales {ref['kind']}/{ref['name']}, not rendered")
    elif "replicas" in target[0]["spec"]:
        problems.append(f"{name_of(target[0])}: sets replicas while an HPA scales it")

for pdb in by_kind("PodDisruptionBudget"):
    sel = pdb["spec"]["selector"]["matchLabels"]
    if len([d for d in deployments if matches(sel, d["spec"]["template"]["metadata"]["labels"])]) != 1:
        problems.append(f"{name_of(pdb)}: does not select exactly one Deployment")

# Production defaults (issue 27): every Deployment survives a node drain and a rollout without dropping
# requests: a PDB, spread across nodes and zones, and a preStop wait inside its termination grace.
for d in deployments:
    component = d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
    svc = values[[k for k, c in services_enabled.items() if c == component][0]]
    pod = d["spec"]["template"]["spec"]
    labels = d["spec"]["template"]["metadata"]["labels"]
    if svc["pdb"]["create"] and not [p for p in by_kind("PodDisruptionBudget") if matches(p["spec"]["selector"]["matchLabels"], labels)]:
        problems.append(f"{name_of(d)}: no PodDisruptionBudget selects it")
    spread = pod.get("topologySpreadConstraints") or []
    if (svc["topologySpreadConstraints"] or values["defaultTopologySpread"]) and not all(
            matches(c["labelSelector"]["matchLabels"], labels) for c in spread) or (values["defaultTopologySpread"] and not spread):
        problems.append(f"{name_of(d)}: topologySpreadConstraints {spread} do not spread its own pods")
    anti = (pod.get("affinity") or {}).get("podAntiAffinity")
    if not svc["affinity"] and svc["podAntiAffinityPreset"] != "none" and not anti:
        problems.append(f"{name_of(d)}: no pod anti-affinity (preset {svc['podAntiAffinityPreset']})")
    pre_stop = ((pod["containers"][0].get("lifecycle") or {}).get("preStop") or {}).get("exec", {}).get("command")
    if svc["preStopSleepSeconds"] and not (pre_stop and pre_stop[0] == "node"):
        problems.append(f"{name_of(d)}: no preStop wait (preStopSleepSeconds {svc['preStopSleepSeconds']})")
    if pod["terminationGracePeriodSeconds"] < svc["preStopSleepSeconds"] + 15:
        problems.append(f"{name_of(d)}: terminationGracePeriodSeconds shorter than the preStop wait and the drain")
for hpa in by_kind("HorizontalPodAutoscaler"):
    if "behavior" not in hpa["spec"]:
        problems.append(f"{name_of(hpa)}: no scaling behavior")
for so in by_kind("ScaledObject"):
    spec = so["spec"]
    if set(spec) - {"scaleTargetRef", "minReplicaCount", "maxReplicaCount", "pollingInterval", "cooldownPeriod", "advanced", "triggers"}:
        problems.append(f"{name_of(so)}: unknown spec fields")
    target = spec["scaleTargetRef"]["name"]
    if target not in {d["metadata"]["name"] for d in deployments}:
        problems.append(f"{name_of(so)}: scales {target}, not rendered")
    if target in {h["spec"]["scaleTargetRef"]["name"] for h in by_kind("HorizontalPodAutoscaler")}:
        problems.append(f"{name_of(so)}: {target} is also scaled by the chart's HPA")
    component = next((d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
                      for d in deployments if d["metadata"]["name"] == target), None)
    for t in spec["triggers"]:
        if t["type"] != "prometheus" or f'group="{component}"' not in t["metadata"]["query"] or "bus_consumer_lag_events" not in t["metadata"]["query"]:
            problems.append(f"{name_of(so)}: trigger {t} is not its group's consumer lag")
if values["networkPolicy"]["enabled"] and not by_kind("NetworkPolicy"):
    problems.append("networkPolicy.enabled but no NetworkPolicy rendered")
if values["metrics"]["serviceMonitor"]["enabled"]:
    for np in by_kind("NetworkPolicy"):
        http_from = [p for r in np["spec"].get("ingress") or [] if any(x.get("port") == "http" for x in r.get("ports") or []) for p in r.get("from") or []]
        scraper = {k: v for k, v in values["networkPolicy"]["metrics"].items() if v}
        if scraper not in http_from:
            problems.append(f"{name_of(np)}: the metrics scraper {scraper} cannot reach the http port")

for sm in by_kind("ServiceMonitor"):
    spec = sm["spec"]
    unknown = set(spec) - {"jobLabel", "selector", "namespaceSelector", "endpoints", "targetLabels",
                           "podTargetLabels", "sampleLimit"}
    if unknown:
        problems.append(f"{name_of(sm)}: unknown spec fields {sorted(unknown)}")
    selected = [s for s in services if matches(spec["selector"].get("matchLabels"), s["metadata"]["labels"])
                and all(s["metadata"]["labels"].get(e["key"]) in e["values"]
                        for e in spec["selector"].get("matchExpressions") or [])]
    if {s["metadata"]["labels"]["app.kubernetes.io/component"] for s in selected} != expected:
        problems.append(f"{name_of(sm)}: selects {[s['metadata']['name'] for s in selected]}")
    for e in spec["endpoints"]:
        unknown = set(e) - {"port", "path", "interval", "scrapeTimeout", "honorLabels", "relabelings",
                            "metricRelabelings", "scheme"}
        if unknown:
            problems.append(f"{name_of(sm)}: unknown endpoint fields {sorted(unknown)}")
        if e.get("path") != "/metrics" or any(e["port"] not in {p["name"] for p in s["spec"]["ports"]} for s in selected):
            problems.append(f"{name_of(sm)}: endpoint {e} is not the services' http /metrics")

if values["migration"]["enabled"]:
    if len(jobs) != 1:
        problems.append(f"{len(jobs)} Jobs, expected the migration Job")
    for job in jobs:
        events = set(job["metadata"]["annotations"].get(HOOK, "").split(","))
        if events != {"pre-install", "pre-upgrade"}:
            problems.append(f"{name_of(job)}: hook events {sorted(events)}")
        pod = job["spec"]["template"]["spec"]
        check_pod(name_of(job), pod, [], hook_available)
        env = {e["name"]: e.get("value") for e in pod["containers"][0].get("env") or []}
        if env.get("TARGET") != "migrate":
            problems.append(f"{name_of(job)}: TARGET is {env.get('TARGET')}")
        if pod.get("restartPolicy") != "Never":
            problems.append(f"{name_of(job)}: restartPolicy is not Never")
elif jobs:
    problems.append("a Job is rendered with migration.enabled=false")

for np in by_kind("NetworkPolicy"):
    if not np["spec"].get("egress"):
        problems.append(f"{name_of(np)}: no egress rule (webhook deliveries need egress)")
    admin_rules = [r for r in np["spec"].get("ingress") or [] if any(p.get("port") == "admin" for p in r.get("ports") or [])]
    wanted = values["networkPolicy"]["admin"]["from"]
    if [r["from"] for r in admin_rules] != ([wanted] if wanted and "auth" in expected else []):
        problems.append(f"{name_of(np)}: the admin port is open to {[r.get('from') for r in admin_rules]}, expected networkPolicy.admin.from")
    if any(not r.get("ports") for r in np["spec"].get("ingress") or []):
        problems.append(f"{name_of(np)}: an ingress rule without ports also opens the admin port")

# The admin API (API.md 10): a ClusterIP Service of its own on the auth container's admin port.
admin_services = [s for s in services if s["metadata"]["name"].endswith("-auth-admin")]
auth_deployments = [d for d in deployments if d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "auth"]
if len(admin_services) != (1 if "auth" in expected else 0):
    problems.append(f"{len(admin_services)} admin Services with auth enabled={'auth' in expected}")
for s in admin_services:
    if s["spec"].get("type", "ClusterIP") != "ClusterIP":
        problems.append(f"{name_of(s)}: type {s['spec']['type']}, expected ClusterIP")
    container = auth_deployments[0]["spec"]["template"]["spec"]["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container.get("ports") or []}
    env = {e["name"]: e.get("value") for e in container.get("env") or []}
    if [p["targetPort"] for p in s["spec"]["ports"]] != ["admin"] or str(ports.get("admin")) != env.get("ADMIN_PORT"):
        problems.append(f"{name_of(s)}: does not reach the auth container's ADMIN_PORT ({env.get('ADMIN_PORT')}, ports {ports})")

# Kafka security: every file setting points into a mounted Secret; no credential inline.
# The streams as the template gives them: the words of its define, its template comments left out.
import re
streams_define = open(sys.argv[4]).read().split('define "ofp.streamTypes" -}}', 1)[1].split("{{- end -}}", 1)[0]
STREAMS = set(re.sub(r"\{\{-? */\*.*?\*/ *-?\}\}", " ", streams_define, flags=re.S).split())
users = {u["metadata"]["name"]: u for u in by_kind("KafkaUser")}
config_env = next(iter(by_kind("ConfigMap")), {}).get("data", {})
for d in deployments:
    pod = d["spec"]["template"]["spec"]
    container = pod["containers"][0]
    component = pod_component = d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"]
    env = {e["name"]: e for e in container.get("env") or []}
    if "KAFKA_SASL_PASSWORD" in env or "KAFKA_SASL_PASSWORD" in config_env:
        problems.append(f"{name_of(d)}: KAFKA_SASL_PASSWORD inline; the password must come from a mounted Secret")
    mounts = {m["mountPath"]: m["name"] for m in container.get("volumeMounts") or []}
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    for setting in ("KAFKA_SSL_CA_FILE", "KAFKA_SSL_CERT_FILE", "KAFKA_SSL_KEY_FILE", "KAFKA_SASL_PASSWORD_FILE"):
        if setting not in env:
            continue
        directory, file = env[setting]["value"].rsplit("/", 1)
        secret = (volumes.get(mounts.get(directory), {}) or {}).get("secret")
        if not secret or file not in [i["path"] for i in secret.get("items") or []]:
            problems.append(f"{name_of(d)}: {setting}={env[setting]['value']} is not a file of a mounted Secret")
        elif users and secret["secretName"] not in users and setting != "KAFKA_SSL_CA_FILE":
            problems.append(f"{name_of(d)}: {setting} reads Secret {secret['secretName']}, not its KafkaUser's")
    if component == "auth" and any(k.startswith("KAFKA_S") for k in env):
        problems.append(f"{name_of(d)}: auth gets Kafka credentials it never uses")
    if component != "auth" and users:
        user = d["metadata"]["name"]
        if user not in users:
            problems.append(f"{name_of(d)}: no KafkaUser {user}")
        if values["strimzi"]["kafkaUsers"]["authentication"] == "scram-sha-512" and env.get("KAFKA_SASL_USERNAME", {}).get("value") != user:
            problems.append(f"{name_of(d)}: KAFKA_SASL_USERNAME is not its KafkaUser {user}")
    if component != "auth" and values["kafka"]["tls"]["enabled"] and env.get("KAFKA_SSL", {}).get("value") != "true":
        problems.append(f"{name_of(d)}: kafka.tls.enabled but KAFKA_SSL is not true")

# Strimzi resources against the kafka.strimzi.io/v1beta2 schema of the fields the chart uses (the CRDs
# are not published on a package registry; this is their published API reference, by hand).
topics = by_kind("KafkaTopic")
if values["strimzi"]["kafkaTopics"]["enabled"]:
    names = {t["spec"]["topicName"] for t in topics}
    want = {values["kafka"]["topicPrefix"] + s for s in STREAMS}
    if names != want:
        problems.append(f"KafkaTopics {sorted(names)}, expected {sorted(want)}")
    if config_env.get("KAFKA_CREATE_TOPICS") != "false":
        problems.append("KafkaTopics are rendered but KAFKA_CREATE_TOPICS is not false")
elif topics:
    problems.append("KafkaTopics rendered with strimzi.kafkaTopics.enabled=false")
for t in topics:
    if t["apiVersion"] != "kafka.strimzi.io/v1beta2" or t["metadata"]["labels"].get("strimzi.io/cluster") != values["strimzi"]["clusterName"]:
        problems.append(f"{name_of(t)}: apiVersion or strimzi.io/cluster label wrong")
    if set(t["spec"]) - {"topicName", "partitions", "replicas", "config"}:
        problems.append(f"{name_of(t)}: unknown spec fields {sorted(set(t['spec']) - {'topicName', 'partitions', 'replicas', 'config'})}")
    if not (isinstance(t["spec"]["partitions"], int) and t["spec"]["partitions"] >= 1 and isinstance(t["spec"]["replicas"], int) and 1 <= t["spec"]["replicas"] <= 32767):
        problems.append(f"{name_of(t)}: partitions/replicas out of range")
    if len(t["metadata"]["name"]) > 63 or not __import__("re").fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", t["metadata"]["name"]):
        problems.append(f"{name_of(t)}: not a valid resource name")
OPERATIONS = {"Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction", "AlterConfigs",
              "DescribeConfigs", "IdempotentWrite", "All"}
kafka_components = {c for c in expected if c != "auth"}
if values["strimzi"]["kafkaUsers"]["enabled"]:
    if {u["metadata"]["labels"]["app.kubernetes.io/component"] for u in users.values()} != kafka_components:
        problems.append(f"KafkaUsers for {sorted(users)}, expected one per Kafka-using service {sorted(kafka_components)}")
elif users:
    problems.append("KafkaUsers rendered with strimzi.kafkaUsers.enabled=false")
for u in users.values():
    spec = u["spec"]
    if set(spec) - {"authentication", "authorization", "quotas", "template"} or spec["authentication"]["type"] not in {"tls", "tls-external", "scram-sha-512"}:
        problems.append(f"{name_of(u)}: spec not of the KafkaUser schema")
    if spec["authorization"]["type"] != "simple":
        problems.append(f"{name_of(u)}: authorization type {spec['authorization']['type']}")
    component = u["metadata"]["labels"]["app.kubernetes.io/component"]
    granted = set()
    for acl in spec["authorization"]["acls"]:
        r = acl["resource"]
        if set(acl) - {"resource", "operations", "host", "type"} or set(r) - {"type", "name", "patternType"} \
                or r["type"] not in {"topic", "group", "cluster", "transactionalId"} \
                or r.get("patternType", "literal") not in {"literal", "prefix"} or not set(acl["operations"]) <= OPERATIONS:
            problems.append(f"{name_of(u)}: ACL {acl} not of the KafkaUser schema")
        for op in acl["operations"]:
            granted.add((r["type"], r.get("name"), op))
    prefix = values["kafka"]["topicPrefix"]
    need = {("topic", prefix, "Read"), ("topic", prefix, "Describe")}
    if component == "api":
        need |= {("topic", prefix, "Write"), ("group", "process-manager.", "Read"), ("group", "revocations-api-", "Read")}
    if component == "projector":
        need |= {("group", "projector", "Read")}
    if component == "webhook-dispatcher":
        need |= {("group", "webhook-dispatcher", "Read"), ("group", "revocations-webhook-dispatcher-", "Read")}
    if config_env.get("KAFKA_CREATE_TOPICS") == "true":
        need |= {("topic", prefix, "Create")}
    if granted != need:
        problems.append(f"{name_of(u)}: ACLs {sorted(granted)}, expected {sorted(need)}")

if problems:
    print("\n".join("    " + p for p in problems), file=sys.stderr)
    sys.exit(1)
PY
  ok "$name"
done

# --- 5. values.schema.json and required values -----------------------------------------------------

step "values.schema.json rejects wrong types and unknown keys; required values are enforced"
base=(template ofp "$CHART" --values "$CHART/ci/default-values.yaml")
"$HELM" "${base[@]}" >/dev/null || die "the default case does not render"
expect_schema_failure() {
  local what="$1"
  shift
  if "$HELM" "${base[@]}" "$@" >"$WORK/out" 2>&1; then
    die "$what: the render succeeded"
  fi
  grep -q "values don't meet the specifications of the schema" "$WORK/out" ||
    { cat "$WORK/out" >&2; die "$what: failed, but not because of values.schema.json"; }
  ok "$what: $(grep -m1 "^- at" "$WORK/out" || true)"
}
expect_schema_failure "string for an integer" --set api.replicaCount=two
expect_schema_failure "string for a boolean" --set-string ingress.enabled=true
expect_schema_failure "number for a string" --set logLevel=3
expect_schema_failure "string for a list" --set kafka.brokers=kafka:9092
expect_schema_failure "value outside an enum" --set api.service.type=ExternalName
expect_schema_failure "unknown top-level key" --set replicaCount=3
expect_schema_failure "unknown nested key" --set api.replicas=3
expect_schema_failure "admin token too short" --set adminToken=short
expect_schema_failure "unknown SASL mechanism" --set kafka.sasl.mechanism=gssapi
expect_schema_failure "unknown KafkaUser authentication" --set strimzi.kafkaUsers.authentication=oauth
expect_chart_failure() {
  local what="$1" message="$2"
  shift 2
  if "$HELM" "${base[@]}" "$@" >"$WORK/out" 2>&1; then
    die "$what: the render succeeded"
  fi
  grep -qF "$message" "$WORK/out" || { cat "$WORK/out" >&2; die "$what: failed for another reason"; }
  ok "$what: $message"
}
expect_chart_failure "Strimzi resources without a cluster" "set strimzi.clusterName" --set strimzi.kafkaTopics.enabled=true
expect_chart_failure "SASL without its Secret" "kafka.sasl.passwordSecret" --set kafka.sasl.mechanism=scram-sha-512
expect_chart_failure "tls KafkaUsers without TLS" "needs kafka.tls.enabled" \
  --set strimzi.clusterName=events --set strimzi.kafkaUsers.enabled=true --set strimzi.kafkaUsers.authentication=tls
expect_chart_failure "a ServiceMonitor the NetworkPolicy would block" "the NetworkPolicy would block every scrape" \
  --set metrics.serviceMonitor.enabled=true --set networkPolicy.metrics.namespaceSelector=null
expect_chart_failure "a preStop wait longer than the grace period allows" "must be at least api.preStopSleepSeconds + 15" \
  --set api.preStopSleepSeconds=20
expect_chart_failure "KEDA and the HPA on one Deployment" "turn one off" \
  --set projector.keda.enabled=true --set projector.keda.prometheusServerAddress=http://prometheus:9090 --set projector.autoscaling.enabled=true
expect_schema_failure "KEDA for a service that consumes no lag" --set api.keda.enabled=true
if "$HELM" template ofp "$CHART" >"$WORK/out" 2>&1; then
  die "a render without database.url and kafka.brokers succeeded"
fi
grep -q "set database.url" "$WORK/out" && grep -q "set kafka.brokers" "$WORK/out" ||
  { cat "$WORK/out" >&2; die "the render without required values failed for another reason"; }
ok "no database.url / kafka.brokers: the render fails with the chart's message"

# --- 6. documentation ------------------------------------------------------------------------------

step "every value documented with ## @param, and README.md's parameters table up to date"
cp "$CHART/README.md" "$WORK/README.md"
if ! "$README_GENERATOR" --values "$CHART/values.yaml" --readme "$WORK/README.md" >"$WORK/readme.out" 2>&1; then
  grep -v '^Skipping check' "$WORK/readme.out" >&2 || true
  die "values.yaml metadata (## @param) is incomplete or wrong"
fi
if ! diff -u "$CHART/README.md" "$WORK/README.md" >"$WORK/readme.diff"; then
  cat "$WORK/readme.diff" >&2
  die "README.md is stale: run $README_GENERATOR --values charts/ofp/values.yaml --readme charts/ofp/README.md"
fi
ok "values.yaml and README.md agree"

# --- 7. monitoring ---------------------------------------------------------------------------------

step "alert rules (promtool check rules, promtool test rules) and the dashboard's PromQL"
# The rules as the chart renders them with its default thresholds and runbook links, every service
# enabled, in namespace ofp (the tests' own).
"$HELM" template ofp "$CHART" --namespace ofp --values "$CHART/ci/default-values.yaml" \
  --set metrics.prometheusRule.enabled=true --set metrics.dashboard.enabled=true \
  --show-only templates/monitoring-rules.yaml --show-only templates/monitoring-dashboard.yaml \
  >"$WORK/monitoring.yaml" || die "helm template of the monitoring objects"
"$PYTHON" - "$WORK" "$CHART/README.md" <<'PY' || die "the rendered PrometheusRule or dashboard ConfigMap is malformed"
import json, re, sys, yaml
work = sys.argv[1]
docs = [d for d in yaml.safe_load_all(open(f"{work}/monitoring.yaml")) if d]
rule = next(d for d in docs if d["kind"] == "PrometheusRule")
with open(f"{work}/rules.yaml", "w") as out:
    yaml.safe_dump(rule["spec"], out, sort_keys=False)
dashboard = json.loads(next(d for d in docs if d["kind"] == "ConfigMap")["data"]["ofp.json"])
exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
# Grafana's variables are not PromQL: a regex matcher stands in for $namespace and $pod, 5m for
# $__rate_interval.
exprs = [re.sub(r"\$(namespace|pod)", ".*", e).replace("$__rate_interval", "5m") for e in exprs]
group = {"name": "dashboard", "rules": [{"record": f"dashboard:panel_{i}", "expr": e} for i, e in enumerate(exprs)]}
with open(f"{work}/dashboard-rules.yaml", "w") as out:
    yaml.safe_dump({"groups": [group]}, out, sort_keys=False)
rules = [r for g in rule["spec"]["groups"] for r in g["rules"]]
alerts = [r for r in rules if "alert" in r]
# Each alert's runbook_url names a section of the README's "Alerts", which /docs/runbooks serves with
# GitHub's anchors (platform/src/runbooks.ts).
readme = open(sys.argv[2]).read()
section = readme.split("\n## Alerts\n", 1)[1].split("\n## ", 1)[0]
anchors = {re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", h.lower()).strip()) for h in re.findall(r"^### (.+)$", section, re.M)}
unlinked = [r["alert"] for r in alerts if r.get("annotations", {}).get("runbook_url", "#").split("#", 1)[1] not in anchors]
if unlinked:
    sys.exit(f"    alerts whose runbook_url names no section of the README's Alerts: {unlinked}")
print(f"    {len(alerts)} alerts and {len(rules) - len(alerts)} recording rules, each alert with a runbook_url; {len(exprs)} dashboard expressions")
PY
"$PROMTOOL" check rules "$WORK/rules.yaml" >"$WORK/promtool.out" 2>&1 || { cat "$WORK/promtool.out" >&2; die "promtool check rules"; }
cp "$CHART/tests/alerts.test.yaml" "$WORK/alerts.test.yaml"
"$PROMTOOL" test rules "$WORK/alerts.test.yaml" >"$WORK/promtool.out" 2>&1 || { cat "$WORK/promtool.out" >&2; die "promtool test rules"; }
ok "$(grep -c '^  - name:' "$CHART/tests/alerts.test.yaml") alert unit tests pass"
"$PROMTOOL" check rules "$WORK/dashboard-rules.yaml" >"$WORK/promtool.out" 2>&1 || { cat "$WORK/promtool.out" >&2; die "a dashboard expression does not parse"; }
ok "every dashboard expression parses"

# --- 8. skaffold --------------------------------------------------------------------------------------

# skaffold.yaml's setValueTemplates become `helm --set key=value` once skaffold renders them (Go's
# text/template; no skaffold binary here): render them with Go's text/template and an example
# environment, then the chart with those values. A comma-separated KAFKA_BROKERS given to
# kafka.brokers[0] once failed here (helm splits --set values on commas).
step "skaffold.yaml's chart values render"
mkdir -p "$WORK/skaffold-render"
cat >"$WORK/skaffold-render/main.go" <<'GO'
package main

import (
	"os"
	"text/template"
)

// Renders each argument as a Go template over the environment, one result per line.
func main() {
	env := map[string]string{}
	for _, name := range []string{"IMAGE_REPO_ofp", "IMAGE_TAG_ofp", "DATABASE_URL", "KAFKA_BROKERS"} {
		env[name] = os.Getenv(name)
	}
	for _, text := range os.Args[1:] {
		template.Must(template.New("value").Parse(text)).Execute(os.Stdout, env)
		os.Stdout.WriteString("\n")
	}
}
GO
mapfile -t keys < <("$PYTHON" -c 'import sys, yaml; print("\n".join(yaml.safe_load(open(sys.argv[1]))["deploy"]["helm"]["releases"][0]["setValueTemplates"]))' "$ROOT/skaffold.yaml")
mapfile -t templates < <("$PYTHON" -c 'import sys, yaml; print("\n".join(yaml.safe_load(open(sys.argv[1]))["deploy"]["helm"]["releases"][0]["setValueTemplates"].values()))' "$ROOT/skaffold.yaml")
mapfile -t rendered < <(cd "$WORK/skaffold-render" && IMAGE_REPO_ofp=registry.local/ofp IMAGE_TAG_ofp=dev \
  DATABASE_URL=postgres://ofp:ofp@postgres:5432/ofp KAFKA_BROKERS=kafka-0:9092,kafka-1:9092 go run main.go "${templates[@]}")
sets=()
for i in "${!keys[@]}"; do sets+=(--set "${keys[$i]}=${rendered[$i]}"); done
"$HELM" template ofp "$CHART" "${sets[@]}" >"$WORK/skaffold.yaml.out" 2>&1 || { cat "$WORK/skaffold.yaml.out" >&2; die "the chart does not render with skaffold.yaml's values"; }
grep -q 'KAFKA_BROKERS: "kafka-0:9092,kafka-1:9092"' "$WORK/skaffold.yaml.out" || die "skaffold.yaml's KAFKA_BROKERS does not reach the services whole"
ok "setValueTemplates render, and a comma-separated KAFKA_BROKERS becomes the broker list"

# --- 9. package ------------------------------------------------------------------------------------

step "helm package"
"$HELM" package "$CHART" --destination "$WORK" >/dev/null || die "helm package"
ok "$(basename "$WORK"/ofp-*.tgz)"

printf '\nchart-check: all checks passed\n'
