#!/usr/bin/env bash
# Gradescope runs this once, when it builds the autograder image (Ubuntu, as root).
# The bundle's lab/ holds this lab's files (rubric/gradescope/build.py put them there).
set -euo pipefail
SOURCE="${AUTOGRADER_SOURCE:-/autograder/source}"

export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends python3 python3-venv python3-pip git
# bubblewrap isolates learner code inside the container too; the image may not allow the user
# namespaces it needs, so run_autograder checks at grading time and says which it used.
apt-get install -y --no-install-recommends bubblewrap || echo "setup.sh: bubblewrap not installed"

python3 -m venv /autograder/venv
/autograder/venv/bin/python -m pip install --upgrade pip
/autograder/venv/bin/python -m pip install -r "$SOURCE/lab/requirements.txt"
