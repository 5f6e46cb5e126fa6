{{/* vim: set filetype=mustache: */}}

{{/*
The chart name, truncated to 63 characters (DNS label limit).
*/}}
{{- define "ofp.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The release-qualified name. The longest component suffix is "-webhook-dispatcher" (19), so the
base is cut to 43 characters to keep every derived name a valid DNS label.
*/}}
{{- define "ofp.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 43 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 43 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 43 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The name of one component's resources. Call with (dict "root" $ "component" "webhook-dispatcher").
*/}}
{{- define "ofp.componentFullname" -}}
{{- printf "%s-%s" (include "ofp.fullname" .root) .component -}}
{{- end -}}

{{/*
The namespace of every resource.
*/}}
{{- define "ofp.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Chart name and version, as used by the helm.sh/chart label.
*/}}
{{- define "ofp.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
Labels of every resource.
*/}}
{{- define "ofp.labels" -}}
helm.sh/chart: {{ include "ofp.chart" . }}
{{ include "ofp.selectorLabels" . }}
app.kubernetes.io/version: {{ include "ofp.versionLabel" . | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: ofp
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The app.kubernetes.io/version label: the image tag (or appVersion) made a valid label value
(a skaffold tag such as `abc123@sha256:...` has characters a label cannot hold).
*/}}
{{- define "ofp.versionLabel" -}}
{{- $version := .Values.image.tag | default .Chart.AppVersion | toString -}}
{{- regexReplaceAll "[^-A-Za-z0-9_.]" $version "_" | trunc 63 | trimAll "-_." -}}
{{- end -}}

{{/*
Selector labels of the release (every component).
*/}}
{{- define "ofp.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ofp.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
Labels of one component's resources. Call with (dict "root" $ "component" "api").
*/}}
{{- define "ofp.componentLabels" -}}
{{ include "ofp.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
Selector labels of one component. Call with (dict "root" $ "component" "api").
*/}}
{{- define "ofp.componentSelectorLabels" -}}
{{ include "ofp.selectorLabels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/*
Annotations of every resource (commonAnnotations), as a YAML block or nothing.
*/}}
{{- define "ofp.annotations" -}}
{{- with .Values.commonAnnotations }}
{{- toYaml . }}
{{- end }}
{{- end -}}

{{/*
The image reference: [registry/]repository(:tag|@digest); the tag defaults to the appVersion.
*/}}
{{- define "ofp.image" -}}
{{- $registry := .Values.global.imageRegistry | default .Values.image.registry -}}
{{- $repository := .Values.image.repository -}}
{{- $ref := printf ":%s" (.Values.image.tag | default .Chart.AppVersion | toString) -}}
{{- if .Values.image.digest -}}
{{- $ref = printf "@%s" .Values.image.digest -}}
{{- end -}}
{{- if $registry -}}
{{- printf "%s/%s%s" $registry $repository $ref -}}
{{- else -}}
{{- printf "%s%s" $repository $ref -}}
{{- end -}}
{{- end -}}

{{/*
imagePullSecrets of a pod spec (global and chart ones, deduplicated), or nothing.
*/}}
{{- define "ofp.imagePullSecrets" -}}
{{- $secrets := uniq (concat .Values.global.imagePullSecrets .Values.imagePullSecrets) -}}
{{- if $secrets -}}
imagePullSecrets:
{{- range $secrets }}
  - name: {{ . | quote }}
{{- end }}
{{- end -}}
{{- end -}}

{{/*
The ServiceAccount of the services.
*/}}
{{- define "ofp.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ofp.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The ServiceAccount of the migration hook: a hook-owned one while the chart creates ServiceAccounts
(the release's own does not exist yet before install), else the one given.
*/}}
{{- define "ofp.migration.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- printf "%s-migrate" (include "ofp.fullname" .) -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The Secret holding DATABASE_URL and ADMIN_TOKEN.
*/}}
{{- define "ofp.secretName" -}}
{{- default (include "ofp.fullname" .) .Values.existingSecret -}}
{{- end -}}

{{/*
The Secret the migration hook reads DATABASE_URL from: the existing Secret, or a hook-owned copy
(the release's own Secret does not exist yet before install).
*/}}
{{- define "ofp.migration.secretName" -}}
{{- if .Values.existingSecret -}}
{{- .Values.existingSecret -}}
{{- else -}}
{{- printf "%s-migrate" (include "ofp.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/*
The admin token: the given one, else the one already in the release's Secret (kept across
upgrades), else a new random one. `helm template` cannot look the Secret up and generates one.
*/}}
{{- define "ofp.adminToken" -}}
{{- if .Values.adminToken -}}
{{- .Values.adminToken -}}
{{- else -}}
{{- $existing := lookup "v1" "Secret" (include "ofp.namespace" .) (include "ofp.fullname" .) -}}
{{- $key := .Values.existingSecretKeys.adminToken -}}
{{- if and $existing $existing.data (hasKey $existing.data $key) -}}
{{- index $existing.data $key | b64dec -}}
{{- else -}}
{{- randAlphaNum 40 -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The key-encryption keys of the secrets at rest (SECRETS_KEY_FILE, docs/secrets.md): the given ones,
else the ones already in the release's Secret (kept across upgrades: a new key would not open what the
old one sealed), else a new random one. `helm template` cannot look the Secret up and generates one.
*/}}
{{- define "ofp.secretsKey" -}}
{{- if .Values.secretsKey -}}
{{- .Values.secretsKey -}}
{{- else -}}
{{- $existing := lookup "v1" "Secret" (include "ofp.namespace" .) (include "ofp.fullname" .) -}}
{{- $key := .Values.existingSecretKeys.secretsKey -}}
{{- if and $existing $existing.data (hasKey $existing.data $key) -}}
{{- index $existing.data $key | b64dec -}}
{{- else -}}
{{- printf "k%s %s\n" (now | date "20060102") (randBytes 32) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The public base URL (the OAuth issuer): publicUrl, else derived from the Ingress host.
*/}}
{{- define "ofp.publicUrl" -}}
{{- if .Values.publicUrl -}}
{{- .Values.publicUrl -}}
{{- else if .Values.ingress.enabled -}}
{{- printf "%s://%s" (ternary "https" "http" .Values.ingress.tls) .Values.ingress.hostname -}}
{{- end -}}
{{- end -}}

{{/*
Where the alerts' runbook_url points: metrics.prometheusRule.runbookBaseUrl, else the runbooks page
every service serves (platform/src/runbooks.ts) at the public URL, else at the first enabled service's
in-cluster address.
*/}}
{{- define "ofp.runbookBaseUrl" -}}
{{- $publicUrl := include "ofp.publicUrl" . -}}
{{- if .Values.metrics.prometheusRule.runbookBaseUrl -}}
{{- .Values.metrics.prometheusRule.runbookBaseUrl -}}
{{- else if $publicUrl -}}
{{- printf "%s/docs/runbooks" $publicUrl -}}
{{- else -}}
{{- $first := "" -}}
{{- range $key := list "api" "webhookDispatcher" "auth" "projector" -}}
{{- if and (not $first) (index $.Values $key).enabled }}{{ $first = $key }}{{ end -}}
{{- end -}}
{{- printf "http://%s.%s.svc:%v/docs/runbooks" (include "ofp.componentFullname" (dict "root" . "component" (kebabcase $first))) (include "ofp.namespace" .) (index .Values $first).service.ports.http -}}
{{- end -}}
{{- end -}}

{{/*
Where api and webhook-dispatcher reach the auth service inside the cluster.
*/}}
{{- define "ofp.authUrl" -}}
{{- if .Values.authUrl -}}
{{- .Values.authUrl -}}
{{- else -}}
{{- printf "http://%s:%v" (include "ofp.componentFullname" (dict "root" . "component" "auth")) .Values.auth.service.ports.http -}}
{{- end -}}
{{- end -}}

{{/*
The non-secret environment of every service, as a YAML map (the ConfigMap's data; the migration
hook inlines it, since the ConfigMap does not exist yet before install).
*/}}
{{- define "ofp.configEnv" -}}
LOG_LEVEL: {{ .Values.logLevel | quote }}
{{- with (include "ofp.publicUrl" .) }}
PUBLIC_URL: {{ . | quote }}
{{- end }}
{{- if .Values.kafka.brokers }}
KAFKA_BROKERS: {{ join "," .Values.kafka.brokers | quote }}
{{- end }}
KAFKA_TOPIC_PREFIX: {{ .Values.kafka.topicPrefix | quote }}
KAFKA_TOPIC_PARTITIONS: {{ .Values.kafka.topicPartitions | toString | quote }}
KAFKA_REPLICATION_FACTOR: {{ .Values.kafka.replicationFactor | toString | quote }}
KAFKA_CREATE_TOPICS: {{ and .Values.kafka.createTopics (not .Values.strimzi.kafkaTopics.enabled) | toString | quote }}
KAFKA_SESSION_TIMEOUT_MS: {{ .Values.kafka.sessionTimeoutMs | toString | quote }}
DATABASE_POOL_SIZE: {{ .Values.database.poolSize | toString | quote }}
DATABASE_STATEMENT_TIMEOUT_MS: {{ .Values.database.statementTimeoutMs | toString | quote }}
DATABASE_LOCK_TIMEOUT_MS: {{ .Values.database.lockTimeoutMs | toString | quote }}
DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS: {{ .Values.database.idleInTransactionTimeoutMs | toString | quote }}
DATABASE_CONNECT_TIMEOUT_MS: {{ .Values.database.connectTimeoutMs | toString | quote }}
DATABASE_REQUEST_DEADLINE_MS: {{ .Values.database.requestDeadlineMs | toString | quote }}
READ_YOUR_WRITES_TIMEOUT_MS: {{ .Values.readYourWritesTimeoutMs | toString | quote }}
WEBHOOK_ALLOW_PRIVATE_TARGETS: {{ .Values.webhookAllowPrivateTargets | toString | quote }}
AUTH_URL: {{ include "ofp.authUrl" . | quote }}
{{- with .Values.otelExporterOtlpEndpoint }}
OTEL_EXPORTER_OTLP_ENDPOINT: {{ . | quote }}
{{- end }}
{{- end -}}

{{/*
A security context without the chart's `enabled` switch and without empty lists, maps and strings
(booleans and numbers are kept), or nothing when disabled.
*/}}
{{- define "ofp.securityContext" -}}
{{- if .enabled -}}
{{- $context := dict -}}
{{- range $name, $value := omit . "enabled" -}}
{{- if or $value (kindIs "bool" $value) (kindIs "float64" $value) (kindIs "int64" $value) (kindIs "int" $value) -}}
{{- $_ := set $context $name $value -}}
{{- end -}}
{{- end -}}
{{- if $context -}}
{{- toYaml $context -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A probe from its values (without `enabled`) and the path to GET on the http port.
Call with (dict "probe" .Values.api.livenessProbe "path" "/livez").
*/}}
{{- define "ofp.probe" -}}
httpGet:
  path: {{ .path }}
  port: http
{{ toYaml (omit .probe "enabled") }}
{{- end -}}

{{/*
The values keys of the services, in deployment order; the component name is their kebab case.
*/}}
{{- define "ofp.serviceKeys" -}}
auth api projector webhookDispatcher
{{- end -}}

{{/*
The event streams of the platform, each the topic `<kafka.topicPrefix><stream>`.
*/}}
{{- define "ofp.streamTypes" -}}
{{- /* begin stream types: generated by `npm run describe` from platformStreamTypes() (platform/src/streams.ts); edit that, not this */ -}}

phone_number_types people items orders fulfillment_orders shipments purchase_orders invoices returns inventory inventory_adjustments webhooks revocations

{{- /* end stream types */ -}}
{{- end -}}

{{/*
The values keys of the services that use Kafka (auth never does: the api's relay publishes its events).
*/}}
{{- define "ofp.kafkaServiceKeys" -}}
api projector webhookDispatcher
{{- end -}}

{{/*
The consumer groups of a Kafka-using component, as Strimzi ACL resources (the names the services use:
services/projector/src/module.ts, services/webhook-dispatcher/src/delivery/event-intake.ts, the api's
process managers `process-manager.<name>`, and each process's revocation deny-list
`revocations-<TARGET>-<host>-<uuid>`). Call with the component name.
*/}}
{{- define "ofp.consumerGroups" -}}
{{- if eq . "api" -}}
- {name: process-manager., patternType: prefix}
- {name: revocations-api-, patternType: prefix}
{{- else if eq . "projector" -}}
- {name: projector, patternType: literal}
{{- else if eq . "webhook-dispatcher" -}}
- {name: webhook-dispatcher, patternType: literal}
- {name: revocations-webhook-dispatcher-, patternType: prefix}
{{- end -}}
{{- end -}}

{{/*
The Kafka connection settings of one Kafka-using component: env entries, volumes and mounts, each
Secret mounted as files (never read into an env var). Call with (dict "root" $ "component" "api" "part" "env|volumes|mounts").
*/}}
{{- define "ofp.kafkaSecurity" -}}
{{- $v := .root.Values -}}
{{- $user := include "ofp.componentFullname" (dict "root" .root "component" .component) -}}
{{- $strimziUsers := $v.strimzi.kafkaUsers.enabled -}}
{{- $scram := and $strimziUsers (eq $v.strimzi.kafkaUsers.authentication "scram-sha-512") -}}
{{- $tlsUser := and $strimziUsers (eq $v.strimzi.kafkaUsers.authentication "tls") -}}
{{- $clientSecret := ternary $user $v.kafka.tls.clientSecret $tlsUser -}}
{{- $certKey := ternary "user.crt" $v.kafka.tls.clientCertKey $tlsUser -}}
{{- $keyKey := ternary "user.key" $v.kafka.tls.clientKeyKey $tlsUser -}}
{{- $mechanism := ternary "scram-sha-512" $v.kafka.sasl.mechanism $scram -}}
{{- $username := ternary $user $v.kafka.sasl.username $scram -}}
{{- $passwordSecret := ternary $user $v.kafka.sasl.passwordSecret $scram -}}
{{- $passwordKey := ternary "password" $v.kafka.sasl.passwordKey $scram -}}
{{- if eq .part "env" }}
{{- if $v.kafka.tls.enabled }}
- name: KAFKA_SSL
  value: "true"
{{- if $v.kafka.tls.caSecret }}
- name: KAFKA_SSL_CA_FILE
  value: /etc/ofp/kafka/ca/{{ $v.kafka.tls.caKey }}
{{- end }}
{{- if $clientSecret }}
- name: KAFKA_SSL_CERT_FILE
  value: /etc/ofp/kafka/client/{{ $certKey }}
- name: KAFKA_SSL_KEY_FILE
  value: /etc/ofp/kafka/client/{{ $keyKey }}
{{- end }}
{{- end }}
{{- if $mechanism }}
- name: KAFKA_SASL_MECHANISM
  value: {{ $mechanism | quote }}
- name: KAFKA_SASL_USERNAME
  value: {{ $username | quote }}
- name: KAFKA_SASL_PASSWORD_FILE
  value: /etc/ofp/kafka/sasl/{{ $passwordKey }}
{{- end }}
{{- else if eq .part "volumes" }}
{{- if and $v.kafka.tls.enabled $v.kafka.tls.caSecret }}
- name: kafka-ca
  secret:
    secretName: {{ $v.kafka.tls.caSecret }}
    items:
      - key: {{ $v.kafka.tls.caKey }}
        path: {{ $v.kafka.tls.caKey }}
{{- end }}
{{- if and $v.kafka.tls.enabled $clientSecret }}
- name: kafka-client
  secret:
    secretName: {{ $clientSecret }}
    items:
      - key: {{ $certKey }}
        path: {{ $certKey }}
      - key: {{ $keyKey }}
        path: {{ $keyKey }}
{{- end }}
{{- if $mechanism }}
- name: kafka-sasl
  secret:
    secretName: {{ $passwordSecret }}
    items:
      - key: {{ $passwordKey }}
        path: {{ $passwordKey }}
{{- end }}
{{- else if eq .part "mounts" }}
{{- if and $v.kafka.tls.enabled $v.kafka.tls.caSecret }}
- name: kafka-ca
  mountPath: /etc/ofp/kafka/ca
  readOnly: true
{{- end }}
{{- if and $v.kafka.tls.enabled $clientSecret }}
- name: kafka-client
  mountPath: /etc/ofp/kafka/client
  readOnly: true
{{- end }}
{{- if $mechanism }}
- name: kafka-sasl
  mountPath: /etc/ofp/kafka/sasl
  readOnly: true
{{- end }}
{{- end }}
{{- end -}}

{{/*
Scheduling of a service's pods: its affinity, or the anti-affinity preset (soft: prefer nodes that run
no pod of the same component; hard: require them), and its topology spread constraints, or the chart's
default spread across zones and nodes where possible. Call with (dict "root" $ "component" ... "svc" ...).
*/}}
{{- define "ofp.scheduling" -}}
{{- $selector := include "ofp.componentSelectorLabels" . | fromYaml -}}
{{- if .svc.affinity }}
affinity:
  {{- toYaml .svc.affinity | nindent 2 }}
{{- else if eq .svc.podAntiAffinityPreset "soft" }}
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 100
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector:
            matchLabels:
              {{- toYaml $selector | nindent 14 }}
{{- else if eq .svc.podAntiAffinityPreset "hard" }}
affinity:
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      - topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- toYaml $selector | nindent 12 }}
{{- end }}
{{- if .svc.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml .svc.topologySpreadConstraints | nindent 2 }}
{{- else if .root.Values.defaultTopologySpread }}
topologySpreadConstraints:
  {{- range $key := list "topology.kubernetes.io/zone" "kubernetes.io/hostname" }}
  - maxSkew: 1
    topologyKey: {{ $key }}
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels:
        {{- toYaml $selector | nindent 8 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/*
Checks that need more than the schema; fails the render with every problem at once.
*/}}
{{- define "ofp.validateValues" -}}
{{- $messages := list -}}
{{- if and (not .Values.existingSecret) (not .Values.database.url) -}}
{{- $messages = append $messages "ofp: set database.url (the Postgres connection URL) or existingSecret (a Secret holding it)." -}}
{{- end -}}
{{- if and (not .Values.kafka.brokers) (or .Values.api.enabled .Values.projector.enabled .Values.webhookDispatcher.enabled) -}}
{{- $messages = append $messages "ofp: set kafka.brokers; api, projector and webhook-dispatcher need Kafka." -}}
{{- end -}}
{{- if and (or .Values.strimzi.kafkaTopics.enabled .Values.strimzi.kafkaUsers.enabled) (not .Values.strimzi.clusterName) -}}
{{- $messages = append $messages "ofp: set strimzi.clusterName (the Strimzi Kafka cluster) to render KafkaTopic or KafkaUser resources." -}}
{{- end -}}
{{- if and .Values.kafka.sasl.mechanism (not .Values.strimzi.kafkaUsers.enabled) (or (not .Values.kafka.sasl.username) (not .Values.kafka.sasl.passwordSecret)) -}}
{{- $messages = append $messages "ofp: kafka.sasl.mechanism needs kafka.sasl.username and kafka.sasl.passwordSecret (a Secret holding the password)." -}}
{{- end -}}
{{- if and .Values.strimzi.kafkaUsers.enabled (eq .Values.strimzi.kafkaUsers.authentication "tls") (not .Values.kafka.tls.enabled) -}}
{{- $messages = append $messages "ofp: strimzi.kafkaUsers.authentication=tls needs kafka.tls.enabled (a TLS listener)." -}}
{{- end -}}
{{- $np := .Values.networkPolicy -}}
{{- if and $np.enabled .Values.metrics.serviceMonitor.enabled (not $np.metrics.namespaceSelector) (not $np.metrics.podSelector) -}}
{{- $messages = append $messages "ofp: metrics.serviceMonitor.enabled with networkPolicy.enabled needs networkPolicy.metrics.namespaceSelector or podSelector (your Prometheus): the NetworkPolicy would block every scrape." -}}
{{- end -}}
{{- range $key := splitList " " (include "ofp.serviceKeys" $) -}}
{{- $svc := index $.Values $key -}}
{{- if and $svc.enabled (lt (int $svc.terminationGracePeriodSeconds) (add (int $svc.preStopSleepSeconds) 15 | int)) -}}
{{- $messages = append $messages (printf "ofp: %s.terminationGracePeriodSeconds (%v) must be at least %s.preStopSleepSeconds + 15 (%v): the process drains for up to 15 s after SIGTERM, which comes once the preStop sleep ends." $key $svc.terminationGracePeriodSeconds $key (add (int $svc.preStopSleepSeconds) 15)) -}}
{{- end -}}
{{- if and $svc.enabled $svc.keda $svc.keda.enabled $svc.autoscaling.enabled -}}
{{- $messages = append $messages (printf "ofp: %s.keda.enabled and %s.autoscaling.enabled both scale the Deployment; turn one off (KEDA makes an HPA of its own)." $key $key) -}}
{{- end -}}
{{- if and $svc.enabled $svc.keda $svc.keda.enabled (not $svc.keda.prometheusServerAddress) -}}
{{- $messages = append $messages (printf "ofp: %s.keda.enabled needs %s.keda.prometheusServerAddress (the Prometheus that scrapes the release's metrics)." $key $key) -}}
{{- end -}}
{{- end -}}
{{- if $messages -}}
{{- printf "\nVALUES VALIDATION:\n%s" (join "\n" $messages) | fail -}}
{{- end -}}
{{- end -}}
