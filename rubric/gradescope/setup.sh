#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder image (Ubuntu, as root).
# The bundle's lab/ holds this lab's files (rubric/gradescope/build.py put them there).
set -euo pipefail
SOURCE="${AUTOGRADER_SOURCE:-/autograder/source}"

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip git
# bubblewrap isolates learner code inside the container too; Docker's default seccomp profile
# usually blocks the namespaces it needs, so run_autograder checks at grading time. Where it cannot
# run, learner code runs as this unprivileged user instead (never as root; see README.md).
apt-get install -y --no-install-recommends bubblewrap || echo "setup.sh: bubblewrap not installed"
id -u lesson06-learner >/dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin lesson06-learner

python3 -m venv /autograder/venv
/autograder/venv/bin/python -m pip install --upgrade pip
/autograder/venv/bin/python -m pip install -r "$SOURCE/lab/requirements.txt"
# that user runs this Python and reads its packages, and writes nothing of the autograder's
chmod 755 /autograder
chmod -R go-w,go+rX /autograder/venv "$SOURCE"
