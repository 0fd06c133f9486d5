#!/usr/bin/env bash
# Run here, before a GPU check: puts what the GPU machine lacks into .gpu/
# (ignored by git; carried to the machine): the Debian packages brisk builds
# against (json-c, PCRE2, cmocka), downloaded as .deb files for amd64.
# Usage: tests/gpu/prepare.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .gpu/debs /tmp/brisk-gpu-apt/partial
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >> .git/info/exclude
o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/brisk-gpu-apt)
apt-get "${o[@]}" update -qq
(cd .gpu/debs && apt-get "${o[@]}" download libjson-c-dev libjson-c5 libpcre2-dev libpcre2-8-0 \
  libpcre2-16-0 libpcre2-32-0 libpcre2-posix3 libcmocka-dev libcmocka0)
ls -l .gpu/debs
