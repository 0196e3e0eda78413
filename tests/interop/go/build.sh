#!/bin/sh
# Builds the Go interop consumers into tests/interop/go/bin/.
# Uses the default GOMODCACHE / GOCACHE so CI can cache them; does nothing
# when both binaries are newer than every source file (FORCE=1 rebuilds).
set -eu
cd "$(dirname "$0")"
BINS="gocbcore-consumer godcp-consumer"

if [ "${FORCE:-0}" != 1 ]; then
    stale=0
    for b in $BINS; do
        if [ ! -x "bin/$b" ] || [ -n "$(find . -path ./bin -prune -o \( -name '*.go' -o -name go.mod -o -name go.sum -o -name build.sh \) -newer "bin/$b" -print | head -n 1)" ]; then
            stale=1
        fi
    done
    if [ "$stale" = 0 ]; then
        echo "build.sh: bin/ is up to date"
        exit 0
    fi
fi

command -v go >/dev/null 2>&1 || { echo "build.sh: go not found in PATH" >&2; exit 1; }
mkdir -p bin
# -mod=readonly: go.mod/go.sum are pinned; a missing module is downloaded
# through GOPROXY but never changes the pins.
for b in $BINS; do
    go build -mod=readonly -trimpath -o "bin/$b.tmp" "./cmd/$b"
    mv -f "bin/$b.tmp" "bin/$b"
done
echo "build.sh: built $(echo $BINS | sed 's/ /, /') into $(pwd)/bin"
