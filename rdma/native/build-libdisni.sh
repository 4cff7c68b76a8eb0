#!/usr/bin/env bash
# Builds libdisni, the JNI library under the disni fabric, from a DiSNI source checkout.
# Run with --help for usage. Downloads nothing: the sources and the build tools must already be here.
set -euo pipefail

readonly SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly EXPECTED_VERSION="2.1"

usage() {
    cat <<EOF
Usage: $(basename "$0") --source DIR [--prefix DIR] [--jobs N]

Builds libdisni.so (DiSNI ${EXPECTED_VERSION}, the version of the com.ibm.disni:disni jar the project uses)
with its autotools build and installs it under PREFIX/lib.

  --source DIR   the libdisni directory of a DiSNI checkout at tag v${EXPECTED_VERSION}, for example
                   git clone --branch v${EXPECTED_VERSION} https://github.com/zrlio/disni
                 then --source disni/libdisni. The checkout is copied, never modified.
  --prefix DIR   where to install (default: ${SCRIPT_DIR}/build); the library lands in DIR/lib
  --jobs N       parallel make jobs (default: the number of CPUs)
  -h, --help     this text

Needs: libibverbs-dev and librdmacm-dev (Debian/Ubuntu package names), a JDK with its headers
(JAVA_HOME, or the JDK of the javac on PATH), autoconf, automake, libtool, make and g++.
EOF
}

die() {
    echo "build-libdisni: error: $*" >&2
    exit 1
}

source_dir=""
prefix="${SCRIPT_DIR}/build"
jobs="$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)"

while [[ $# -gt 0 ]]; do
    case "$1" in
        --source)
            [[ $# -ge 2 ]] || die "--source needs a directory"
            source_dir="$2"
            shift 2
            ;;
        --prefix)
            [[ $# -ge 2 ]] || die "--prefix needs a directory"
            prefix="$2"
            shift 2
            ;;
        --jobs)
            [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || die "--jobs needs a positive number"
            jobs="$2"
            shift 2
            ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            usage >&2
            die "unknown argument: $1"
            ;;
    esac
done

# ---- the sources
[[ -n "${source_dir}" ]] || { usage >&2; die "--source is required"; }
[[ -d "${source_dir}" ]] || die "--source ${source_dir} is not a directory"
source_dir="$(cd "${source_dir}" && pwd)"
[[ -f "${source_dir}/configure.ac" && -f "${source_dir}/src/verbs/com_ibm_disni_verbs_impl_NativeDispatcher.cpp" ]] \
    || die "${source_dir} is not the libdisni directory of a DiSNI checkout (no configure.ac and src/verbs/)"
found_version="$(sed -n 's/^AC_INIT(\[libdisni\], \[\([^]]*\)\].*/\1/p' "${source_dir}/configure.ac")"
[[ "${found_version}" == "${EXPECTED_VERSION}" ]] \
    || die "${source_dir} is libdisni '${found_version:-unknown}', but the disni jar is ${EXPECTED_VERSION}: check out tag v${EXPECTED_VERSION}" \
           "(the jar refuses a library of another JNI version)"

# ---- what the build needs
missing_packages=()
[[ -f /usr/include/infiniband/verbs.h ]] || missing_packages+=(libibverbs-dev)
[[ -f /usr/include/rdma/rdma_cma.h ]] || missing_packages+=(librdmacm-dev)
command -v autoreconf >/dev/null || missing_packages+=(autoconf)
command -v automake >/dev/null || missing_packages+=(automake)
command -v libtoolize >/dev/null || missing_packages+=(libtool)
command -v make >/dev/null || missing_packages+=(make)
command -v g++ >/dev/null || missing_packages+=(g++)
if [[ ${#missing_packages[@]} -gt 0 ]]; then
    echo "build-libdisni: missing: ${missing_packages[*]}" >&2
    echo "build-libdisni: on Debian or Ubuntu install them with:" >&2
    echo "  sudo apt-get install ${missing_packages[*]}" >&2
    exit 1
fi

if [[ -z "${JAVA_HOME:-}" ]]; then
    javac_path="$(command -v javac || true)"
    [[ -n "${javac_path}" ]] || die "no JDK: set JAVA_HOME or put javac on PATH (Debian: sudo apt-get install openjdk-17-jdk-headless)"
    JAVA_HOME="$(dirname "$(dirname "$(readlink -f "${javac_path}")")")"
fi
[[ -f "${JAVA_HOME}/include/jni.h" && -f "${JAVA_HOME}/include/linux/jni_md.h" ]] \
    || die "JAVA_HOME ${JAVA_HOME} has no include/jni.h and include/linux/jni_md.h: point it at a JDK, not a JRE"

# ---- build in a scratch copy, install into the prefix
mkdir -p "${prefix}"
prefix="$(cd "${prefix}" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/libdisni-build.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
cp -a "${source_dir}/." "${work}/"

echo "build-libdisni: building libdisni ${found_version} from ${source_dir}"
echo "build-libdisni: JDK ${JAVA_HOME}, install prefix ${prefix}"
(
    cd "${work}"
    # What DiSNI's autoprepare.sh does: automake insists on these files, and the macro directory must exist.
    touch NEWS README AUTHORS ChangeLog COPYING
    mkdir -p m4
    autoreconf --install
    ./configure --prefix="${prefix}" --with-jdk="${JAVA_HOME}"
    make -j"${jobs}"
    make install
) || die "the autotools build failed; its output is above"

library="${prefix}/lib/libdisni.so"
[[ -e "${library}" ]] || die "the build finished but ${library} is missing"

cat <<EOF

build-libdisni: installed ${library}

Run the disni fabric with:
  java --add-exports java.base/sun.nio.ch=ALL-UNNAMED -Djava.library.path=${prefix}/lib ...
(JDK 17 needs the --add-exports option: DiSNI reads buffer addresses through sun.nio.ch.DirectBuffer.)

Run the device tests (an RDMA device or Soft-RoCE must be up; see docs/rdma-disni.md):
  mvn -pl rdma test -Dtest=DisniDeviceTest \\
    -Dtest.jvm.args="-Xss4m --add-exports java.base/sun.nio.ch=ALL-UNNAMED -Djava.library.path=${prefix}/lib -Ddex.disni.test.host=<RDMA interface address>"
EOF
