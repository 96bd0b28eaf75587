#!/usr/bin/env bash
# aiptrain on the other Pythons it supports (3.12 and 3.13; the suite itself runs on 3.11): each
# gets a virtual environment with aiptrain installed as a user installs it, then the command line,
# validation and packaging (a dry run and a refused job) and one real local TensorFlow 2 job
# (runtime 2.1, which runs on its own Python 3.7) must work from it.
#
# Usage: scripts/check_other_pythons.sh [VERSION ...]   (default: 3.12 3.13)
# An interpreter is found as aiptrain finds them: on PATH, then under pyenv's root. One that is
# not on this machine is reported and skipped; set AIPTRAIN_REQUIRE_PYTHONS=1 to fail instead.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO="$PWD"
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(3.12 3.13)

find_python() {
  local version=$1 candidate
  candidate=$(command -v "python$version" 2>/dev/null || true)
  if [ -n "$candidate" ] && "$candidate" -c 'pass' 2>/dev/null; then echo "$candidate"; return 0; fi
  for candidate in $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$version".*/bin/"python$version" 2>/dev/null | sort -r); do
    if "$candidate" -c 'pass' 2>/dev/null; then echo "$candidate"; return 0; fi
  done
  return 1
}

fail() { echo "FAILED on Python $version: $*" >&2; exit 1; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for version in "${versions[@]}"; do
  if ! python=$(find_python "$version"); then
    if [ "${AIPTRAIN_REQUIRE_PYTHONS:-0}" = 1 ]; then fail "no python$version on PATH or under pyenv's root"; fi
    echo "Python $version: not on this machine (PATH, pyenv), skipped" >&2
    continue
  fi
  venv="$REPO/.venv-py$version"
  if [ ! -x "$venv/bin/aiptrain" ] || [ "$venv/.installed" -ot pyproject.toml ]; then
    echo "Python $version: installing aiptrain into $venv ..." >&2
    "$python" -m venv "$venv"
    { "$venv/bin/python" -m pip install --quiet --upgrade pip && "$venv/bin/pip" install --quiet -e "$REPO"; } \
      > "$venv.install.log" 2>&1 || { tail -n 30 "$venv.install.log" >&2; fail "installing aiptrain"; }
    touch "$venv/.installed"
  fi
  home="$scratch/home-$version"
  export AIPTRAIN_HOME="$home"
  unset AIPTRAIN_LOCAL_PYTHON
  cli="$venv/bin/aiptrain"
  "$cli" --help > /dev/null || fail "aiptrain --help"
  trainer="$REPO/tests/environments/trainers/keras2_lambda/trainer"
  plan=$("$cli" jobs submit training "py${version/./}_plan" --package-path "$trainer" --module-name trainer.task \
         --region us-central1 --runtime-version 2.1 --dry-run --format json) || fail "dry run"
  echo "$plan" | "$venv/bin/python" -c '
import json, sys
plan = json.load(sys.stdin)
assert plan["package"]["name"].startswith("keras2_lambda_trainer-0.1"), plan["package"]
assert "TensorFlow 2.1.0 on Python 3.7" in plan["localRuntime"][0], plan["localRuntime"]
' || fail "the dry run's plan"
  set +e
  refused=$("$cli" jobs submit training "py_refused" --package-path "$trainer" --module-name trainer.task \
            --region us-central1 --runtime-version 2.1 --python-version 2.7 2>&1)
  code=$?
  set -e
  [ "$code" = 2 ] && [[ "$refused" == *"runtime 2.1 does not support Python 2.7"* ]] || fail "a refused job: $refused"
  job="py${version/./}_keras"
  "$cli" jobs submit training "$job" --package-path "$trainer" --module-name trainer.task --region us-central1 \
    --runtime-version 2.1 --python-version 3.7 --job-dir "gs://pythons/$job" --stream-logs > "$scratch/$job.log" 2>&1 \
    || { tail -n 40 "$scratch/$job.log" >&2; fail "the TensorFlow job"; }
  "$venv/bin/python" -c '
import json, sys
report = json.load(open(sys.argv[1]))
assert report["tensorflow"] == "2.1.0" and report["lambda_width"] == 4, report
' "$home/storage/pythons/$job/result.json" || fail "the job's result"
  echo "Python $version: CLI, dry run, refusal and a TensorFlow 2.1 job from $venv: ok" >&2
done
