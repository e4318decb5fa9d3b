#!/usr/bin/env bash
# Build the local fleet's binaries once and cache them outside the repository (see docs/localfleet.md).
#
#   scripts/localfleet-build.sh            # build whatever is missing, print the bin directory
#   scripts/localfleet-build.sh --print    # print the bin directory only (exit 1 when something is missing)
#   scripts/localfleet-build.sh --kueue [--print]  # the same for Kueue (only a fleet started with `up --kueue`
#                                                  # needs it): prints Kueue's directory (bin/kueue-controller, CRDs,
#                                                  # webhook configurations)
#
# Everything is built from Go modules through the module proxy, each in its own wrapper module (their k8s.io/*
# requirements differ): kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from k8s.io/kubernetes
# (its 33 staging modules are `replace`d with their published v0.x tags, which is why `go install` cannot do it),
# etcd, kwok and the LeaderWorkerSet controller. The cache is keyed by every version below, so changing a version
# builds into a new directory. Go 1.26 is required (Go 1.27 turns on JSON v2, which breaks the apiserver's OpenAPI).
set -euo pipefail

K8S_VERSION=v1.36.3
K8S_STAGING_VERSION=v0.36.3
ETCD_VERSION=v3.6.6
KWOK_VERSION=v0.7.0
LWS_VERSION=v0.7.0
# Kueue is built only when asked (`--kueue`), into a directory of its own: the other binaries' cache key is unchanged.
KUEUE_VERSION=v0.17.0
KUEUE_BUILD_TIMEOUT=${GPUFLEET_KUEUE_BUILD_TIMEOUT:-1800}  # seconds; a cold build on 2 busy cores

CACHE_ROOT=${GPUFLEET_LOCALFLEET_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/gpufleet-localfleet}
KEY="k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_lws-${LWS_VERSION}"
OUT="$CACHE_ROOT/$KEY"
BIN="$OUT/bin"
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok lws-controller)

have_all() {
  local b
  for b in "${BINARIES[@]}"; do [[ -x "$BIN/$b" ]] || return 1; done
  [[ -f "$OUT/lws-crds.yaml" ]]
}

KUEUE_OUT="$CACHE_ROOT/kueue-${KUEUE_VERSION}"
have_kueue() {
  [[ -x "$KUEUE_OUT/bin/kueue-controller" && -f "$KUEUE_OUT/kueue-crds.yaml" && -f "$KUEUE_OUT/kueue-webhooks.yaml" ]]
}
KUEUE=0
PRINT=0
for arg in "$@"; do
  case "$arg" in
    --kueue) KUEUE=1 ;;
    --print) PRINT=1 ;;
    *) echo "localfleet-build: unknown option $arg (--print, --kueue)" >&2; exit 2 ;;
  esac
done
if [[ $KUEUE == 1 ]]; then
  if have_kueue; then echo "$KUEUE_OUT"; exit 0; fi
  [[ $PRINT == 1 ]] && exit 1
elif [[ $PRINT == 1 ]]; then
  have_all || exit 1
  echo "$BIN"
  exit 0
elif have_all; then
  echo "$BIN"
  exit 0
fi

command -v go >/dev/null || { echo "localfleet-build: Go 1.26 is required (go not found)" >&2; exit 1; }
case "$(go env GOVERSION)" in
  go1.26*) ;;
  *) export GOEXPERIMENT=nojsonv2 ;;  # newer Go: keep encoding/json v1 semantics for the apiserver's OpenAPI
esac
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOTOOLCHAIN=local
mkdir -p "$BIN" "$OUT/src"
log() { echo "localfleet-build: $*" >&2; }

build_kubernetes() {
  local dir="$OUT/src/kubernetes" mod="$(go env GOMODCACHE)"
  mkdir -p "$dir"
  (
    cd "$dir"
    if [[ ! -f go.mod ]]; then
      go mod download -json "k8s.io/kubernetes@$K8S_VERSION" >/dev/null
      local staging
      staging=$(sed -n 's#^\s*\(k8s\.io/[a-z0-9-]*\) => ./staging/.*#\1#p' \
        "$mod/cache/download/k8s.io/kubernetes/@v/$K8S_VERSION.mod")
      {
        echo "module gpufleet.local/build/kubernetes"
        echo "go 1.26.0"
        echo "require k8s.io/kubernetes $K8S_VERSION"
        echo "replace ("
        for m in $staging; do echo "	$m => $m $K8S_STAGING_VERSION"; done
        echo ")"
      } >go.mod
    fi
    local ver="k8s.io/component-base/version" cver="k8s.io/client-go/pkg/version" ld="-s -w"
    local minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
    for p in "$ver" "$cver"; do
      ld+=" -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
      ld+=" -X $p.buildDate=1970-01-01T00:00:00Z"
    done
    local c
    for c in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
      [[ -x "$BIN/$c" ]] && continue
      log "building $c $K8S_VERSION (kube-apiserver takes 5-8 minutes cold on 2 cores)"
      go build -trimpath -ldflags "$ld" -o "$BIN/$c.tmp" "k8s.io/kubernetes/cmd/$c"
      mv "$BIN/$c.tmp" "$BIN/$c"
    done
  )
}

build_simple() {  # name module-version package output
  local name=$1 modver=$2 pkg=$3 outname=$4 dir="$OUT/src/$1"
  [[ -x "$BIN/$outname" ]] && return 0
  log "building $outname ($modver)"
  mkdir -p "$dir"
  (
    cd "$dir"
    [[ -f go.mod ]] || printf 'module gpufleet.local/build/%s\ngo 1.26.0\nrequire %s\n' "$name" "$modver" >go.mod
    go build -trimpath -ldflags "-s -w" -o "$BIN/$outname.tmp" "$pkg"
    mv "$BIN/$outname.tmp" "$BIN/$outname"
  )
}

build_etcd() {
  local dir="$OUT/src/etcd"
  [[ -x "$BIN/etcd" ]] && return 0
  log "building etcd $ETCD_VERSION"
  mkdir -p "$dir"
  (
    cd "$dir"
    [[ -f go.mod ]] || printf 'module gpufleet.local/build/etcd\ngo 1.26.0\nrequire go.etcd.io/etcd/server/v3 %s\n' \
      "$ETCD_VERSION" >go.mod
    go build -trimpath -ldflags "-s -w" -o "$BIN/etcd.tmp" go.etcd.io/etcd/server/v3
    mv "$BIN/etcd.tmp" "$BIN/etcd"
  )
}

build_lws() {
  build_simple lws "sigs.k8s.io/lws $LWS_VERSION" sigs.k8s.io/lws/cmd lws-controller
  local src
  src=$(go mod download -json "sigs.k8s.io/lws@$LWS_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  cat "$src"/config/crd/bases/*.yaml >"$OUT/lws-crds.yaml.tmp"
  mv "$OUT/lws-crds.yaml.tmp" "$OUT/lws-crds.yaml"
}

build_kueue() {  # the controller (cmd/kueue), its CRDs and its webhook configurations, from the Go module
  local dir="$KUEUE_OUT/src/kueue" src
  mkdir -p "$KUEUE_OUT/bin" "$dir"
  if [[ ! -x "$KUEUE_OUT/bin/kueue-controller" ]]; then
    log "building kueue-controller (sigs.k8s.io/kueue $KUEUE_VERSION; a few minutes cold, at most ${KUEUE_BUILD_TIMEOUT}s)"
    (
      cd "$dir"
      [[ -f go.mod ]] || printf 'module gpufleet.local/build/kueue\ngo 1.26.0\nrequire sigs.k8s.io/kueue %s\n' \
        "$KUEUE_VERSION" >go.mod
      timeout "$KUEUE_BUILD_TIMEOUT" go build -trimpath -ldflags "-s -w" -o "$KUEUE_OUT/bin/kueue-controller.tmp" \
        sigs.k8s.io/kueue/cmd/kueue
      mv "$KUEUE_OUT/bin/kueue-controller.tmp" "$KUEUE_OUT/bin/kueue-controller"
    ) || { log "building Kueue $KUEUE_VERSION failed or took over ${KUEUE_BUILD_TIMEOUT}s"; return 1; }
  fi
  src=$(go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
  cat "$src"/config/components/crd/bases/*.yaml >"$KUEUE_OUT/kueue-crds.yaml.tmp"
  mv "$KUEUE_OUT/kueue-crds.yaml.tmp" "$KUEUE_OUT/kueue-crds.yaml"
  cat "$src/config/components/webhook/manifests.yaml" >"$KUEUE_OUT/kueue-webhooks.yaml.tmp"  # not the cache's mode
  mv "$KUEUE_OUT/kueue-webhooks.yaml.tmp" "$KUEUE_OUT/kueue-webhooks.yaml"
}

if [[ $KUEUE == 1 ]]; then
  build_kueue
  have_kueue || { log "Kueue is missing in $KUEUE_OUT"; exit 1; }
  echo "$KUEUE_OUT"
  exit 0
fi

build_kubernetes
build_etcd
build_simple kwok "sigs.k8s.io/kwok $KWOK_VERSION" sigs.k8s.io/kwok/cmd/kwok kwok
build_lws
have_all || { log "some binaries are missing in $BIN"; exit 1; }
echo "$BIN"
