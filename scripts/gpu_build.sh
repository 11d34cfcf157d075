# Sourced by the GPU verification scripts: unpacks the Debian packages carried in .deps/debs
# (the GPU machine has no registry) into a private prefix, builds into $BUILD_DIR (default
# build-gpu) with the build log in $logs, and leaves the shell in $BUILD_DIR. Sets root and logs.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
logs=${LOG_DIR:-$root/gpu-logs}
mkdir -p "$logs"
prefix=/tmp/kg-deps
mkdir -p $prefix
for d in "$root"/.deps/debs/*.deb; do dpkg -x "$d" $prefix; done
# Debian's multiarch headers (openssl/configuration.h) sit beside the prefix's include folder.
export CPATH="$prefix/usr/include/x86_64-linux-gnu${CPATH:+:$CPATH}"
export KG_PREFIX_PATH=$prefix/usr BUILD_DIR=${BUILD_DIR:-$root/build-gpu}
SECONDS=0
bash "$root/scripts/setup.sh" build >"$logs/build.log" 2>&1 || { tail -30 "$logs/build.log"; exit 1; }
echo "build: ${SECONDS}s"
cd "$BUILD_DIR" || exit 1
