#!/usr/bin/env bash
# Builds and tests the Java client of leaf with javac and JUnit's console launcher (no Maven).
#
#   clients/java/build.sh build            compile src/main -> build/classes, jar build/leaf-client-<version>.jar
#   clients/java/build.sh test             build, compile src/test, run every JUnit 5 test (real nodes)
#   clients/java/build.sh bench [rounds]   AtomicLong vs IdPool nextId() per thread, against a real node
#
# Needs JDK 17 (javac, jar, java) and, for test/bench, Debian's junit5 jars in /usr/share/java.
# The tests start nodes from $LEAF_BIN (default: <repo>/target/debug/leaf).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
VERSION="$(tr -d '[:space:]' < "$HERE/VERSION")"
JAR="$HERE/build/leaf-client-$VERSION.jar"
JAVA_DIR="${JUNIT_JARS:-/usr/share/java}"
TEST_JARS=(junit-jupiter-api.jar junit-jupiter-params.jar apiguardian-api.jar opentest4j.jar junit-platform-commons.jar)
LAUNCHER="$JAVA_DIR/junit-platform-console-standalone.jar"

die() { echo "build.sh: $*" >&2; exit 1; }

need_jdk() {
    for tool in javac jar java; do
        command -v "$tool" >/dev/null || die "$tool not found: apt-get install openjdk-17-jdk-headless junit5"
    done
}

build() {
    need_jdk
    rm -rf "$HERE/build/classes"
    mkdir -p "$HERE/build/classes/io/leaf/client"
    # shellcheck disable=SC2046
    javac --release 17 -Xlint:all -Werror -encoding UTF-8 -d "$HERE/build/classes" \
        $(find "$HERE/src/main/java" -name '*.java' | sort)
    printf '%s\n' "$VERSION" > "$HERE/build/classes/io/leaf/client/version.txt"
    rm -f "$HERE"/build/leaf-client-*.jar
    jar --create --file "$JAR" -C "$HERE/build/classes" .
    echo "built $JAR"
}

test_classpath() {
    local cp="" jar
    for jar in "${TEST_JARS[@]}"; do
        [[ -f "$JAVA_DIR/$jar" ]] || die "missing $JAVA_DIR/$jar: apt-get install openjdk-17-jdk-headless junit5"
        cp="$cp:$JAVA_DIR/$jar"
    done
    [[ -f "$LAUNCHER" ]] || die "missing $LAUNCHER: apt-get install openjdk-17-jdk-headless junit5"
    echo "${cp#:}"
}

build_tests() {
    local cp
    cp="$(test_classpath)"
    rm -rf "$HERE/build/test-classes"
    mkdir -p "$HERE/build/test-classes"
    # shellcheck disable=SC2046
    javac --release 17 -Xlint:all -Werror -encoding UTF-8 -cp "$HERE/build/classes:$cp" \
        -d "$HERE/build/test-classes" $(find "$HERE/src/test/java" -name '*.java' | sort)
}

run_tests() {
    build
    build_tests
    local started=$SECONDS status=0
    # ContractTest (@Order(Integer.MAX_VALUE)) runs last: it checks that the requests the other
    # tests actually sent cover every operation the client lists (leaf.contract.coverage).
    java -Dleaf.root="$REPO" -Dleaf.contract.coverage=true -jar "$LAUNCHER" --disable-banner --disable-ansi-colors \
        --details=tree --config='junit.jupiter.testclass.order.default=org.junit.jupiter.api.ClassOrderer$OrderAnnotation' \
        --class-path "$HERE/build/classes:$HERE/build/test-classes" --scan-class-path || status=$?
    echo "build.sh test: exit $status after $((SECONDS - started)) s"
    return "$status"
}

bench() {
    build
    build_tests
    java -Dleaf.root="$REPO" -cp "$HERE/build/classes:$HERE/build/test-classes" io.leaf.client.bench.PoolBench "${1:-5}"
}

case "${1:-}" in
    build) build ;;
    test) run_tests ;;
    bench) bench "${2:-5}" ;;
    *) die "usage: build.sh build | test | bench [rounds]" ;;
esac
