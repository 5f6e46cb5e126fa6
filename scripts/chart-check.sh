#!/usr/bin/env bash
# Checks the Helm chart charts/ofp offline (STYLE.md "Charts"):
#   1. helm lint --strict with every charts/ofp/ci/*-values.yaml
#   2. helm template with each of them, for the oldest supported and a current Kubernetes version
#   3. the rendered manifests against the Kubernetes JSON schemas (kubernetes-validate, strict: unknown
#      fields fail), offline: the schemas ship inside the PyPI package
#   4. the renders' own consistency: selectors, ports and backends that point at rendered objects, the
#      secure pod defaults, the migration hook, each service's TARGET and probes
#   5. values.schema.json: wrong types and unknown keys fail the render because of the schema, and a
#      render without the required addresses fails with the chart's own message
#   6. every value documented (`## @param`) and the README's parameters table up to date
#   7. helm package
# Tools come from the registries only and are cached in .cache/ (git-ignored): helm is built with
# `go install` (about 3 minutes on 2 cores the first time), kubernetes-validate from PyPI into a venv,
# the Bitnami readme generator from npm. Set HELM=/path/to/helm to use another helm 3 binary.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHART="$ROOT/charts/ofp"
CACHE="$ROOT/.cache"

HELM_VERSION="v3.21.4"
KUBERNETES_VALIDATE_VERSION="1.37.0"
README_GENERATOR_VERSION="2.7.2"
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

ensure_helm
ensure_kubernetes_validate
ensure_readme_generator
step "tools"
ok "helm $("$HELM" version --template '{{.Version}} ({{.GoVersion}})') at $HELM"
ok "kubernetes-validate $("$KUBERNETES_VALIDATE" --version)"
ok "readme-generator-for-helm $README_GENERATOR_VERSION"

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
    # Only the Prometheus Operator's CRD has no schema in the package; it is checked in step 4.
    if grep -v "kind ServiceMonitor with api version monitoring.coreos.com/v1" "$WORK/validate.out" | grep -q .; then
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
  "$PYTHON" - "$WORK/$name-${KUBE_VERSIONS[0]}.yaml" "$values" "$CHART/values.yaml" <<'PY' || die "$name"
import sys
import yaml

rendered_path, case_path, defaults_path = sys.argv[1:4]
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
    expected_routes = {"/oauth": "auth", "/.well-known": "auth", "/admin": "auth",
                       "/v2/authenticate": "auth", "/api/v2/authenticate": "auth",
                       "/v2/webhooks": "webhook-dispatcher", "/v2/webhook_deliveries": "webhook-dispatcher",
                       "/api/v2/webhooks": "webhook-dispatcher", "/api/v2/webhook_deliveries": "webhook-dispatcher",
                       "/v2/webhook_event_types": "webhook-dispatcher",
                       "/api/v2/webhook_event_types": "webhook-dispatcher",
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

# --- 7. package ------------------------------------------------------------------------------------

step "helm package"
"$HELM" package "$CHART" --destination "$WORK" >/dev/null || die "helm package"
ok "$(basename "$WORK"/ofp-*.tgz)"

printf '\nchart-check: all checks passed\n'
